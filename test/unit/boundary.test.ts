import { readdirSync, readFileSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import { describe, expect, test } from 'vitest'

/**
 * The engine's boundary (docs/architecture.md, "The engine's boundary"): outside src-main/engine/ and
 * src-main/db/ no module of the host imports the schema or a row type, reaches the engine's
 * context, or speaks SQL; it uses the engine's facade and its decoded domain types.
 */

const ROOT = resolve(import.meta.dirname, '../..')
const SRC_MAIN = join(ROOT, 'src-main')
const INSIDE = ['src-main/engine/', 'src-main/db/']

/** Modules nobody outside the engine and the database layer may import. */
const FORBIDDEN_MODULES = ['src-main/db/schema', 'src-main/engine/store/context', 'src-main/engine/memory/context', 'src-main/engine/internals']
const FORBIDDEN_PACKAGES = ['better-sqlite3', 'drizzle-orm']
/** SQL in a string: a query, a write, a pragma, a transaction. */
const SQL = /\b(SELECT\s[^'"`]*\bFROM\b|INSERT\s+INTO\b|DELETE\s+FROM\b|UPDATE\s+\w+\s+SET\b|PRAGMA\b|BEGIN\s+(IMMEDIATE|EXCLUSIVE|DEFERRED)\b)|\.pragma\(/i
/** The engine's context, reached through the facade. */
const CONTEXT = /\bengine\??\.ctx\b/
/** A stored row's type (JobRow, LeaseRow, EventRow, …) named in an import. */
const ROW_TYPE = /\b[A-Z]\w*Row\b/

/** What a module does that the boundary forbids: one line each. */
export function crossings(path: string, source: string): string[] {
  const found: string[] = []
  const imports = [...source.matchAll(/\b(?:from|import)\s*\(?\s*'([^']+)'/g)].map((m) => m[1]!)
  for (const specifier of imports) {
    if (FORBIDDEN_PACKAGES.some((p) => specifier === p || specifier.startsWith(`${p}/`))) found.push(`imports ${specifier}`)
    if (!specifier.startsWith('.')) continue
    const target = relative(ROOT, resolve(dirname(join(ROOT, path)), specifier)).replaceAll('\\', '/')
    if (FORBIDDEN_MODULES.includes(target)) found.push(`imports ${target}`)
  }
  for (const statement of source.match(/^import[^;]*?from\s*'[^']+'/gms) ?? []) {
    const row = ROW_TYPE.exec(statement)
    if (row) found.push(`imports the row type ${row[0]}`)
  }
  source.split('\n').forEach((line, i) => {
    if (CONTEXT.test(line)) found.push(`line ${i + 1} reaches the engine's context: ${line.trim()}`)
    if (SQL.test(line)) found.push(`line ${i + 1} speaks SQL: ${line.trim()}`)
  })
  return found
}

function hostModules(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name)
    if (entry.isDirectory()) return hostModules(path)
    return entry.name.endsWith('.ts') ? [relative(ROOT, path).replaceAll('\\', '/')] : []
  })
}

describe('the engine boundary', () => {
  test('outside the engine and the database layer, no module of the host imports a row or the schema, reaches the context, or speaks SQL', () => {
    const outside = hostModules(SRC_MAIN).filter((path) => !INSIDE.some((inside) => path.startsWith(inside)))
    expect(outside.length).toBeGreaterThan(30)
    const found = Object.fromEntries(
      outside.map((path) => [path, crossings(path, readFileSync(join(ROOT, path), 'utf8'))] as const).filter(([, lines]) => lines.length > 0),
    )
    expect(found).toEqual({})
  })

  test('the check finds each kind of crossing it forbids (so the test above can fail)', () => {
    const source = [
      "import type { JobRow } from '../db/schema'",
      "import { StoreContext } from '../engine/store/context'",
      "import { EngineContext } from '../engine/memory/context'",
      "import Database from 'better-sqlite3'",
      'const now = engine.ctx.clock.now()',
      "const rows = db.all('SELECT * FROM events WHERE id > ?', 1)",
      "db.pragma('journal_mode')",
    ].join('\n')
    expect(crossings('src-main/http/example.ts', source)).toEqual([
      'imports src-main/db/schema',
      'imports src-main/engine/store/context',
      'imports src-main/engine/memory/context',
      'imports better-sqlite3',
      'imports the row type JobRow',
      "line 5 reaches the engine's context: const now = engine.ctx.clock.now()",
      "line 6 speaks SQL: const rows = db.all('SELECT * FROM events WHERE id > ?', 1)",
      "line 7 speaks SQL: db.pragma('journal_mode')",
    ])
    // A Koa handler's own `ctx` is not the engine's.
    expect(crossings('src-main/http/example.ts', "router.get('/x', (ctx) => reply(ctx, X, engine.now()))")).toEqual([])
  })
})
