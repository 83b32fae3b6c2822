/**
 * The three programs — the host (src-main/), the worker (src-worker/) and the window
 * (src-renderer/) — share only src-shared/, the protocol they speak: the worker exchange, the IPC
 * messages, states, error codes, event types, short ids. None imports another's files, type
 * imports included (a type import still ties one program's code to another's), and src-shared
 * imports none of them. docs/architecture.md draws the layers.
 */
import { readFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { describe, expect, test } from 'vitest'
import { importsOf, sources } from '../helpers/imports'

const ROOT = resolve(import.meta.dirname, '../..')
const PROGRAMS = ['src-main', 'src-worker', 'src-renderer', 'src-shared'] as const
type Program = (typeof PROGRAMS)[number]

/** What each program may import besides itself. */
const ALLOWED: Record<Program, readonly Program[]> = {
  'src-main': ['src-shared'],
  'src-worker': ['src-shared'],
  'src-renderer': ['src-shared'],
  'src-shared': [],
}

function crossings(): string[] {
  const found: string[] = []
  for (const program of PROGRAMS) {
    for (const file of sources(program)) {
      for (const target of importsOf(file, readFileSync(join(ROOT, file), 'utf8'))) {
        const other = PROGRAMS.find((p) => target === p || target.startsWith(`${p}/`))
        if (!other || other === program || ALLOWED[program].includes(other)) continue
        found.push(`${file} → ${target}`)
      }
    }
  }
  return found
}

describe('the programs share only src-shared', () => {
  test('no program imports another, and src-shared imports none of them', () => {
    expect(crossings()).toEqual([])
  })

  test('the check sees an import of every kind', () => {
    const file = 'src-main/pool/x.ts'
    const source = [
      "import { a } from '../../src-worker/a'",
      "import type { B } from '../../src-worker/b'",
      "export { c } from '../../src-renderer/c'",
      "const d = await import('../../src-worker/d')",
      "import { e } from '../../src-shared/e'",
      "import { f } from 'zod'",
    ].join('\n')
    expect(importsOf(file, source)).toEqual(['src-worker/a', 'src-worker/b', 'src-renderer/c', 'src-worker/d', 'src-shared/e'])
  })
})
