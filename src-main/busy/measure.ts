import { cpus } from 'node:os'
import { readOwnTreeCpuMs } from './own-tree'

/** The machine's CPU time so far, summed over cores. */
export interface MachineCpu {
  /** Milliseconds all cores spent idle. */
  idle: number
  /** Milliseconds all cores spent in total. */
  total: number
}

export interface CpuTimes extends MachineCpu {
  /**
   * Milliseconds of CPU the host's process tree used: the host, its local workers and the
   * programs they start ({@link readOwnTreeCpuMs}). The host's own work is not the user's.
   */
  own: number
}

/** The machine's CPU time so far, from the operating system's per-core counters (Linux: /proc/stat). */
export function readMachineCpu(): MachineCpu {
  let idle = 0
  let total = 0
  for (const cpu of cpus()) {
    const t = cpu.times
    idle += t.idle
    total += t.user + t.nice + t.sys + t.idle + t.irq
  }
  return { idle, total }
}

/** Reads the CPU times a sample compares, the host tree's as soon as the machine's. */
export function readCpuTimes(machine: () => MachineCpu = readMachineCpu): CpuTimes {
  return { ...machine(), own: readOwnTreeCpuMs() }
}

/**
 * The busy rating (0–10, one decimal) from CPU use between two readings: 0 when every core
 * sat idle, 10 when none did. The CPU time of the host's process tree is left out, so the
 * scheduler does not shrink its capacity because of its own work: its bookkeeping, and the jobs
 * its local workers run. Pure, so the rule is tested without a machine to load.
 */
export function busyFromCpu(previous: CpuTimes, current: CpuTimes): number {
  const total = current.total - previous.total
  if (total <= 0) return 0
  // The tree's time falls when a process leaves it (a program's child outliving its parent is
  // adopted outside the tree): that span left out nothing, it never adds to the load.
  const own = Math.max(0, current.own - previous.own)
  const busy = total - (current.idle - previous.idle) - own
  return Math.round(Math.min(1, Math.max(0, busy / total)) * 100) / 10
}

/**
 * The rating a sample leaves: halfway from the rating before it to what it measured, to a tenth,
 * with a half tenth taken toward the measure, so that a machine that stays as it is is reached
 * (an idle machine after 0.1 reads 0, not 0.1 for ever).
 */
export function smoothedRating(previous: number, measured: number): number {
  const tenths = Math.round(previous * 10) + Math.round(measured * 10)
  return (measured < previous ? Math.floor(tenths / 2) : Math.ceil(tenths / 2)) / 10
}

/**
 * The machine's CPU time as the program loaded: a host's first sample reads from here, over its
 * start (whose own CPU time is left out), so that it has a span to read by the time the host
 * would lease anything, without a wait.
 */
const PROGRAM_LOADED = { times: readCpuTimes(), at: performance.now() }

/**
 * Measures the busy rating each time `sample()` is called, from the CPU use since the last
 * call (the first, since the program loaded), smoothed ({@link smoothedRating}) so one spike
 * does not swing capacity. A meter given its own `read` (a test's stand-in for the machine)
 * reads from its construction, not from the program's load.
 */
export class CpuBusyMeter {
  private last: CpuTimes
  private lastAt: number
  private rating: number | null = null

  constructor(private readonly read: () => CpuTimes = readCpuTimes) {
    const given = read !== readCpuTimes
    this.last = given ? read() : PROGRAM_LOADED.times
    this.lastAt = given ? performance.now() : PROGRAM_LOADED.at
  }

  /** Milliseconds since the last sample, or since the program loaded: what the next one reads over. */
  msSinceLast(): number {
    return performance.now() - this.lastAt
  }

  sample(): number {
    const now = this.read()
    const measured = busyFromCpu(this.last, now)
    this.last = now
    this.lastAt = performance.now()
    this.rating = this.rating === null ? measured : smoothedRating(this.rating, measured)
    return this.rating
  }
}

/**
 * How busy the person at the desk makes the machine, from the seconds since their last key
 * press or mouse move (Electron's powerMonitor): at the keyboard now → 6, within the minute →
 * 4, within five minutes → 2, away → 0. Background work yields to someone who is working.
 */
export function busyFromUserIdle(idleSeconds: number): number {
  if (idleSeconds < 15) return 6
  if (idleSeconds < 60) return 4
  if (idleSeconds < 300) return 2
  return 0
}

/**
 * The auto busy rating: the busier of the CPU's rating and the user's presence (the larger,
 * not the sum: a user at work also loads the CPU, and that must not count twice).
 */
export function autoBusyRating(cpuRating: number, userIdleSeconds: number | null): number {
  return userIdleSeconds === null ? cpuRating : Math.max(cpuRating, busyFromUserIdle(userIdleSeconds))
}
