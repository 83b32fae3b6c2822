import { readdirSync } from 'node:fs'
import { join, relative, resolve } from 'node:path'

const ROOT = resolve(import.meta.dirname, '../..')

/** The source files under `dir` (a folder of the root), as paths from the root. */
export function sources(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile() && /\.(ts|svelte|mjs)$/.test(entry.name))
    .map((entry) => relative(ROOT, join(entry.parentPath, entry.name)))
}

/** Every relative import of a file (static, type-only and dynamic alike), as a path from the root. */
export function importsOf(file: string, source: string): string[] {
  const specifiers = [...source.matchAll(/(?:^|\s)(?:import|export)\s[^'"]*?from\s+'([^']+)'|import\(\s*'([^']+)'\s*\)/gm)].map((m) => m[1] ?? m[2]!)
  return specifiers.filter((s) => s.startsWith('.')).map((s) => relative(ROOT, resolve(ROOT, file, '..', s)))
}
