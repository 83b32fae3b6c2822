/**
 * The engine's modules form layers: no module imports (at run time) one that imports it back,
 * and the row layer (rows.ts) imports no verb module. Type-only imports are erased and do not count.
 */
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, test } from 'vitest'

const ENGINE = join(__dirname, '../../src-main/engine')

/** Each engine module's run-time imports of other engine modules. */
function engineImports(): Map<string, string[]> {
  const graph = new Map<string, string[]>()
  for (const file of readdirSync(ENGINE).filter((name) => name.endsWith('.ts'))) {
    const source = readFileSync(join(ENGINE, file), 'utf8')
    const imports: string[] = []
    for (const match of source.matchAll(/^import\s+(type\s+)?(\{[^}]*\}|\*\s+as\s+\w+|\w+)\s+from\s+'\.\/([\w-]+)'/gm)) {
      const [, typeOnly, names, module] = match
      const allTypes = names!.startsWith('{') && names!.slice(1, -1).split(',').every((name) => !name.trim() || name.trim().startsWith('type '))
      if (!typeOnly && !allTypes) imports.push(module!)
    }
    graph.set(file.slice(0, -3), imports)
  }
  return graph
}

/** A cycle through `start`, as the list of modules on it, or null. */
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
  test('have no import cycle', () => {
    const graph = engineImports()
    expect(graph.size).toBeGreaterThan(20)
    const cycles = [...graph.keys()].map((module) => cycleFrom(graph, module)).filter((cycle) => cycle !== null)
    expect(cycles).toEqual([])
  })

  test('the row layer imports no verb module', () => {
    expect(engineImports().get('rows')!.sort()).toEqual(['errors', 'ids', 'states'])
  })

  test('the check sees a cycle when there is one', () => {
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
