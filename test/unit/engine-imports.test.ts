/**
 * The engine's folders are its layers, from the bottom: `rules/` (pure: states, capacity, backoff,
 * clock, errors, the event types, the configuration), `store/` (the transaction unit, statements,
 * rows, the write journal, ids and counters, the event log, the outbox), `memory/` (what the engine
 * keeps in memory in step with its rows), `reads/` (read models and the pick), `verbs/` (what
 * changes state), and on top the facade (index.ts, domain.ts). An import — a type import too —
 * runs down or sideways, never up: the few that still run up are listed here by name, so the list
 * can only shrink. No module imports (at run time) one that imports it back.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs'
import { dirname, join, normalize, relative } from 'node:path'
import { describe, expect, test } from 'vitest'

const ENGINE = join(__dirname, '../../src-main/engine')
const LAYERS = ['rules', 'store', 'memory', 'reads', 'verbs'] as const

/** Imports that run up a layer today (from → to, paths inside src-main/engine). */
const KNOWN_UP_ARROWS = [
  'memory/capacity-store.ts → reads/waiting.ts',
  'rules/events.ts → memory/capacity-store.ts',
  'rules/events.ts → verbs/blockers.ts',
  'rules/events.ts → verbs/files.ts',
  'rules/events.ts → verbs/schedules.ts',
  'store/context.ts → memory/active-leases.ts',
  'store/context.ts → memory/job-tally.ts',
  'store/context.ts → memory/queued-rows.ts',
  'store/context.ts → memory/recent-counts.ts',
  'store/context.ts → verbs/queues.ts',
  'store/counters.ts → memory/active-leases.ts',
  'store/rows.ts → domain.ts',
]

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

/** Every import of one engine module by another, type imports included. */
function engineImports(): Import[] {
  const found: Import[] = []
  for (const file of engineFiles()) {
    const source = readFileSync(join(ENGINE, file), 'utf8')
    for (const match of source.matchAll(/^import\s+(type\s+)?(\{[^}]*\}|\*\s+as\s+\w+|\w+)\s+from\s+'(\.[^']+)'/gm)) {
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

  test('have no run-time import cycle', () => {
    const graph = new Map<string, string[]>()
    for (const { from, to, typeOnly } of engineImports()) if (!typeOnly) graph.set(from, [...(graph.get(from) ?? []), to])
    expect(graph.size).toBeGreaterThan(20)
    const cycles = [...graph.keys()].map((module) => cycleFrom(graph, module)).filter((cycle) => cycle !== null)
    expect(cycles).toEqual([])
  })

  test('the checks see an arrow running up, and a cycle, when there is one', () => {
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
  })
})
