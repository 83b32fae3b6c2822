/**
 * The engine's folders are its layers, from the bottom: `rules/` (pure: states, capacity, backoff,
 * clock, errors, the event types, the configuration), `store/` (the transaction unit, statements,
 * rows, the write journal, ids and counters, the event log, the outbox), `memory/` (what the engine
 * keeps in memory in step with its rows), `reads/` (read models and the pick), `verbs/` (what
 * changes state), and on top the facade (index.ts, domain.ts). An import — a type import or a
 * re-export too — runs down or sideways, never up (an arrow that had to run up would be listed
 * here by name, with why). No module imports (at run time) one that imports it back, and no verb
 * names a cache of the context: it asks the module in memory/ that keeps it.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs'
import { dirname, join, normalize, relative } from 'node:path'
import { describe, expect, test } from 'vitest'

const ENGINE = join(__dirname, '../../src-main/engine')
const LAYERS = ['rules', 'store', 'memory', 'reads', 'verbs'] as const

/** Imports that run up a layer today (from → to, paths inside src-main/engine): none. */
const KNOWN_UP_ARROWS: string[] = []

/**
 * The caches of hot state, as fields of the engine's context (memory/context.ts) and the counters
 * (store/context.ts). A verb asks the module that keeps one a named question instead, and its
 * writes reach the caches through the write journal.
 */
const CACHE_FIELDS = ['activeLeases', 'jobTally', 'counters', 'queuedRows', 'counts', 'recentCounts', 'pausedQueues', 'capacityStore'] as const

/** Each place `source` names a cache field of the context, as `line: text`. */
export function cacheReads(source: string): string[] {
  const named = new RegExp(String.raw`\bctx\??\.(${CACHE_FIELDS.join('|')})\b`)
  return source.split('\n').flatMap((text, i) => (named.test(text) ? [`${i + 1}: ${text.trim()}`] : []))
}

interface Import {
  from: string
  to: string
  typeOnly: boolean
}

function engineFiles(dir = ENGINE): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name)
    if (statSync(path).isDirectory()) return engineFiles(path)
    return name.endsWith('.ts') ? [relative(ENGINE, path)] : []
  })
}

/** A write in a module's text: a transaction begun, SQL that writes, or a row layer's write named. */
const WRITE = /\btransact\(|\b(INSERT\s+(OR\s+\w+\s+)?INTO|DELETE\s+FROM|UPDATE\s+\w+\s+SET)\b|\b(insertJob|updateJob|moveJob|writeSetting)\(/

/** Each line of `source` that writes, as `line: text`. */
export function writes(source: string): string[] {
  return source.split('\n').flatMap((text, i) => (WRITE.test(text) ? [`${i + 1}: ${text.trim()}`] : []))
}

/** Every import of one engine module by another, type imports and re-exports included. */
function engineImports(): Import[] {
  const found: Import[] = []
  for (const file of engineFiles()) {
    const source = readFileSync(join(ENGINE, file), 'utf8')
    for (const match of source.matchAll(/^(?:import|export)\s+(type\s+)?(\{[^}]*\}|\*(?:\s+as\s+\w+)?|\w+)\s+from\s+'(\.[^']+)'/gm)) {
      const [, typeOnly, names, spec] = match
      const target = normalize(join(dirname(file), spec!))
      if (target.startsWith('..')) continue // outside the engine
      const to = [`${target}.ts`, join(target, 'index.ts')].find((candidate) => engineFiles().includes(candidate))
      if (!to) continue
      const allTypes = names!.startsWith('{') && names!.slice(1, -1).split(',').every((name) => !name.trim() || name.trim().startsWith('type '))
      found.push({ from: file, to, typeOnly: Boolean(typeOnly) || allTypes })
    }
  }
  return found
}

/** A module's layer: its folder's rank, and the facade above them all. */
const rank = (file: string): number => {
  const folder = file.includes('/') ? file.split('/')[0]! : null
  const index = LAYERS.indexOf(folder as (typeof LAYERS)[number])
  return index === -1 ? LAYERS.length : index
}

export function upArrows(imports: readonly Import[]): string[] {
  return imports
    .filter(({ from, to }) => rank(to) > rank(from))
    .map(({ from, to }) => `${from} → ${to}`)
    .filter((arrow, i, all) => all.indexOf(arrow) === i)
    .sort()
}

/** A cycle of run-time imports through `start`, as the list of modules on it, or null. */
function cycleFrom(graph: Map<string, string[]>, start: string): string[] | null {
  const path: string[] = []
  const seen = new Set<string>()
  const visit = (module: string): string[] | null => {
    if (module === start && path.length > 0) return [...path, start]
    if (seen.has(module)) return null
    seen.add(module)
    path.push(module)
    for (const next of graph.get(module) ?? []) {
      const found = visit(next)
      if (found) return found
    }
    path.pop()
    return null
  }
  return visit(start)
}

describe('the engine modules', () => {
  test('every module sits in a layer folder or is the facade', () => {
    const loose = engineFiles().filter((file) => !file.includes('/') && !['index.ts', 'domain.ts', 'internals.ts'].includes(file))
    expect(loose).toEqual([])
  })

  test('imports (type imports too) run down the layers, but for the known ones that still run up', () => {
    expect(upArrows(engineImports())).toEqual([...KNOWN_UP_ARROWS].sort())
  })

  test('no verb module is imported by the row layer or by what is kept in memory', () => {
    const fromBelow = engineImports().filter(({ from, to }) => (from.startsWith('store/rows') || from.startsWith('memory/')) && to.startsWith('verbs/'))
    expect(fromBelow).toEqual([])
  })

  test('no verb file names a cache of the context', () => {
    const verbs = engineFiles().filter((file) => file.startsWith('verbs/'))
    expect(verbs.length).toBeGreaterThan(10)
    const named = verbs.flatMap((file) => cacheReads(readFileSync(join(ENGINE, file), 'utf8')).map((read) => `${file}:${read}`))
    expect(named).toEqual([])
  })

  test('no read module writes: every write is a verb', () => {
    const reads = engineFiles().filter((file) => file.startsWith('reads/'))
    expect(reads.length).toBeGreaterThan(4)
    const found = reads.flatMap((file) => writes(readFileSync(join(ENGINE, file), 'utf8')).map((line) => `${file}:${line}`))
    expect(found).toEqual([])
  })

  test('have no run-time import cycle', () => {
    const graph = new Map<string, string[]>()
    for (const { from, to, typeOnly } of engineImports()) if (!typeOnly) graph.set(from, [...(graph.get(from) ?? []), to])
    expect(graph.size).toBeGreaterThan(20)
    const cycles = [...graph.keys()].map((module) => cycleFrom(graph, module)).filter((cycle) => cycle !== null)
    expect(cycles).toEqual([])
  })

  test('the checks see an arrow running up, a cycle, and a cache named, when there is one', () => {
    expect(upArrows([{ from: 'rules/states.ts', to: 'verbs/jobs.ts', typeOnly: true }])).toEqual(['rules/states.ts → verbs/jobs.ts'])
    expect(upArrows([{ from: 'verbs/jobs.ts', to: 'rules/states.ts', typeOnly: false }])).toEqual([])
    const graph = new Map([
      ['a', ['b']],
      ['b', ['c']],
      ['c', ['a']],
      ['d', ['a']],
    ])
    expect(cycleFrom(graph, 'a')).toEqual(['a', 'b', 'c', 'a'])
    expect(cycleFrom(graph, 'd')).toBeNull()
    expect(cacheReads('const a = 1\n  if (ctx.pausedQueues.has(q)) return\nctx.counters.nextFence()')).toEqual([
      '2: if (ctx.pausedQueues.has(q)) return',
      '3: ctx.counters.nextFence()',
    ])
    expect(cacheReads('queuePaused(ctx, q)\nctx.clock.now()\nctx.countsOf')).toEqual([])
    expect(writes("return ctx.transact(() => {\nctx.stmt(`INSERT OR REPLACE INTO stats_samples (ts)`)\nreturn updateJob(ctx, job, {})\nctx.one('SELECT ts FROM jobs')")).toEqual([
      '1: return ctx.transact(() => {',
      '2: ctx.stmt(`INSERT OR REPLACE INTO stats_samples (ts)`)',
      '3: return updateJob(ctx, job, {})',
    ])
  })
})
