import { setFlagsFromString } from 'node:v8'

/**
 * How far the host's heap may grow past what a full collection keeps before V8 collects it
 * again: to twice that (`--heap-growing-percent=100`). V8's own factor, up to 4 when its
 * collections are fast, let a host that keeps ~18 MB live carry ~55 MB of garbage after a burst
 * of jobs (each job's rows and copies outlive a few scavenges while it waits and runs), so its
 * resident memory read anywhere from ~160 to ~195 MB at the same moment of the same work. Bounded,
 * it reads ~165 MB, and the drains and single submits run as fast (docs/performance.md, "Memory").
 *
 * Neither Electron's main process nor `leasehold serve` can pass V8 flags at its own start, so
 * the flag is set once the process runs. V8 reads this one each time it sets the next
 * collection's limit, so it holds from the next full collection on. Node, and Electron in its
 * main and utility processes, start V8 with `--no-freeze-flags-after-init`: where V8's flags are
 * frozen, setting one aborts the process.
 */
const HEAP_GROWING_PERCENT = 100

export function boundHeapGrowth(): void {
  setFlagsFromString(`--heap-growing-percent=${HEAP_GROWING_PERCENT}`)
}
