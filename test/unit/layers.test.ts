/**
 * The host's layers as docs/architecture.md's table writes them ("The layers, and where rules
 * live"): each module of src-main/ sits in one row's folders, and imports only its own layer and
 * what its row's "may import" names (layers by name, or a folder); outside the engine the host
 * imports the engine through its facade or its pure rules/. The table is read from the page, so
 * the page and this check cannot drift apart. program-boundaries.test.ts holds the programs.
 */
import { readFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { describe, expect, test } from 'vitest'
import { importsOf, sources } from '../helpers/imports'

const ROOT = resolve(import.meta.dirname, '../..')

export interface Layer {
  name: string
  /** Folders (ending in `/`) and files, as paths from the root. */
  holds: string[]
  /** Layer names and folders; `all` for any. */
  mayImport: string[]
}

/** The rows of the layer table in architecture.md's text. */
export function layerTable(page: string): Layer[] {
  const start = page.indexOf('## The layers, and where rules live')
  const section = page.slice(start, page.indexOf('\n## ', start + 1))
  const rows = section.split('\n').filter((line) => line.startsWith('| ')).slice(1)
  return rows.map((row) => {
    const [name, folders, , may] = row.split(' | ').map((cell) => cell.replace(/^\| |\s*\|$/g, '').trim())
    const paths = (cell: string) => [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1]!)
    const mayImport = may === '—' ? [] : may!.split(',').map((entry) => entry.trim().replaceAll('`', ''))
    return { name: name!, holds: paths(folders!), mayImport }
  })
}

/** Whether `path` (a file, or an import's target without its extension) is `entry` or lies in it. */
function inEntry(path: string, entry: string): boolean {
  if (entry.endsWith('/')) return path.startsWith(entry) || `${path}/` === entry
  return path.replace(/\.(ts|svelte|mjs|js)$/, '') === entry.replace(/\.ts$/, '')
}

const layerOf = (table: readonly Layer[], path: string): Layer | undefined => table.find((layer) => layer.holds.some((entry) => inEntry(path, entry)))

/** An import into the engine from outside it that is neither the facade nor its pure rules. */
function pastTheFacade(file: string, target: string): boolean {
  if (file.startsWith('src-main/engine/') || !target.startsWith('src-main/engine/')) return false
  return target !== 'src-main/engine/index' && !target.startsWith('src-main/engine/rules/')
}

/** What the modules break of the table, one line each: a module in no row, an import its row does not allow. */
export function layerCrossings(table: readonly Layer[], modules: ReadonlyMap<string, readonly string[]>): string[] {
  const found: string[] = []
  for (const [file, targets] of modules) {
    const own = layerOf(table, file)
    if (!own) {
      found.push(`${file} is in no layer`)
      continue
    }
    for (const target of targets) {
      if (pastTheFacade(file, target)) found.push(`${file} → ${target}: past the engine's facade`)
      const other = layerOf(table, target)
      if (!other || other === own || own.mayImport.includes('all')) continue
      if (own.mayImport.includes(other.name) || own.mayImport.some((entry) => entry.endsWith('/') && inEntry(target, entry))) continue
      found.push(`${file} → ${target}: ${own.name} may not import ${other.name}`)
    }
  }
  return found
}

const table = layerTable(readFileSync(join(ROOT, 'docs/architecture.md'), 'utf8'))

describe("the host's layers", () => {
  test('the table names the layers and what each may import', () => {
    expect(table.map((layer) => layer.name)).toEqual(['storage', 'engine', 'host services', 'transports', 'composition', 'worker', 'window', 'protocol'])
    const names = new Set(table.map((layer) => layer.name))
    for (const layer of table) for (const entry of layer.mayImport) expect(names.has(entry) || entry === 'all' || entry.endsWith('/'), `${layer.name} may import "${entry}"`).toBe(true)
  })

  test('every module of the host sits in a layer of the table and imports only what its row allows', () => {
    const files = sources('src-main')
    expect(files.length).toBeGreaterThan(100)
    const modules = new Map(files.map((file) => [file, importsOf(file, readFileSync(join(ROOT, file), 'utf8'))] as const))
    expect(layerCrossings(table, modules)).toEqual([])
  })

  test('the check finds a module in no layer, an import up the layers, and one past the facade', () => {
    const modules = new Map([
      ['src-main/db/backup.ts', ['src-main/engine/store/counters', 'src-main/engine/rules/events', 'src-shared/regular-file']],
      ['src-main/redis/relay.ts', ['src-main/http/views/system', 'src-main/engine/index']],
      ['src-main/dispatch/dispatch.ts', ['src-main/http/errors', 'src-main/worker-roster/directory']],
      ['src-main/http/queue-api.ts', ['src-main/engine/verbs/jobs', 'src-main/engine/rules/clock', 'src-main/db/storage-mode']],
      ['src-main/new-folder/x.ts', []],
      ['src-main/host.ts', ['src-main/http/server', 'src-main/engine/index']],
    ])
    expect(layerCrossings(table, modules)).toEqual([
      "src-main/db/backup.ts → src-main/engine/store/counters: past the engine's facade",
      'src-main/db/backup.ts → src-main/engine/store/counters: storage may not import engine',
      'src-main/dispatch/dispatch.ts → src-main/http/errors: host services may not import transports',
      "src-main/http/queue-api.ts → src-main/engine/verbs/jobs: past the engine's facade",
      'src-main/new-folder/x.ts is in no layer',
    ])
  })
})
