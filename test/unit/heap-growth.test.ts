/**
 * The host and the workers bound their heaps' growth (src-shared/heap-growth.ts): after a full
 * collection, V8 lets the old space grow to about twice what that collection kept before it
 * collects again, where by its own heuristic it lets it grow up to four times. Run in child
 * processes, as the bound is the process's: the same work, objects that outlive a few scavenges
 * and are then dropped as a busy host's job rows are, once with the bound and once without.
 */
import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { expect, test } from 'vitest'

const HEAP_GROWTH = fileURLToPath(new URL('../../src-shared/heap-growth.ts', import.meta.url))

const SCRIPT = `
import { getHeapSpaceStatistics } from 'node:v8'
import { boundHeapGrowth } from ${JSON.stringify(HEAP_GROWTH)}
if (process.argv[1] === 'bounded') boundHeapGrowth()
const oldSpaceUsed = () => getHeapSpaceStatistics().find((space) => space.space_name === 'old_space').space_used_size
const kept = Array.from({ length: 100_000 }, (_, i) => ({ i, text: \`kept \${i}\`.padEnd(64, '.') }))
globalThis.gc()
let peak = 0
const recent = []
for (let round = 0; round < 300; round++) {
  recent.push(Array.from({ length: 4_000 }, (_, i) => ({ round, i, text: \`job \${round}.\${i}\`.padEnd(48, '.') })))
  if (recent.length > 16) recent.shift()
  peak = Math.max(peak, oldSpaceUsed())
}
// What a full collection keeps now (the kept objects and the recent batches, still used below) is the live size.
globalThis.gc()
console.log(JSON.stringify({ peak, live: oldSpaceUsed(), reachable: kept.length + recent.length }))
`

function oldSpace(mode: 'bounded' | 'unbounded'): { peak: number; live: number } {
  const run = spawnSync(process.execPath, ['--expose-gc', '--import', 'tsx', '--input-type=module', '-e', SCRIPT, mode], { encoding: 'utf8', timeout: 60_000 })
  expect(run.stderr).toBe('')
  return JSON.parse(run.stdout) as { peak: number; live: number }
}

test("a Leasehold process's old space grows to about twice what a full collection keeps, not to V8's up to four times", () => {
  const bounded = oldSpace('bounded')
  const unbounded = oldSpace('unbounded')
  // Twice the live size, and what is allocated while V8 marks before it collects.
  expect(bounded.peak / bounded.live).toBeLessThan(3)
  expect(unbounded.peak).toBeGreaterThan(1.3 * bounded.peak)
})
