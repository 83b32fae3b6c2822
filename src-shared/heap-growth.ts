import { setFlagsFromString } from 'node:v8'

/**
 * How far a Leasehold process's heap may grow past what a full collection keeps before V8
 * collects it again: to twice that (`--heap-growing-percent=100`). The host and the workers set
 * it as they start. V8's own factor, up to 4 when its collections are fast, let a host that keeps
 * ~18 MB live carry ~55 MB of garbage after a burst of jobs (each job's rows and copies outlive a
 * few scavenges while it waits and runs), so its resident memory read anywhere from ~160 to
 * ~195 MB at the same moment of the same work; bounded, it reads ~165 MB, and a local worker
 * 153–158 MB instead of 155–177. The drains and single submits run as fast (docs/performance.md,
 * "Memory").
 *
 * Neither Electron's main and utility processes nor `leasehold serve` and `leasehold worker` can
 * pass V8 flags at their own start, so the flag is set once the process runs. V8 reads this one
 * each time it sets the next collection's limit, for every heap of the process (each handler
 * thread has its own), so it holds from the next full collection on. Node, and Electron in its
 * main and utility processes, start V8 with `--no-freeze-flags-after-init`: where V8's flags are
 * frozen, setting one aborts the process.
 */
const HEAP_GROWING_PERCENT = 100

export function boundHeapGrowth(): void {
  setFlagsFromString(`--heap-growing-percent=${HEAP_GROWING_PERCENT}`)
}
