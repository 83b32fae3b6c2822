/**
 * The CPU time of the host's own process tree: the host, its local workers (every thread) and
 * every program they start, with their descendants. That is the host's background work, which
 * the busy rating leaves out: it measures the load of the person at the desk.
 */
import { readdirSync, readFileSync } from 'node:fs'

/** One process as /proc/<pid>/stat describes it. */
export interface ProcStat {
  pid: number
  ppid: number
  /**
   * Clock ticks of CPU: its own (utime + stime, every thread) and that of its children it has
   * reaped (cutime + cstime), so a process that exits and is reaped moves its time into its
   * parent's, and a tree's sum does not drop when one of its processes ends.
   */
  ticks: number
}

/** /proc's clock tick: USER_HZ, 100 on every Linux that Node runs on (not the kernel's HZ). */
const MS_PER_TICK = 10

/** A /proc/<pid>/stat line, or null when it is not one. The name (field 2) may hold spaces and parentheses: fields are counted after its last `)`. */
export function parseProcStat(text: string): ProcStat | null {
  const close = text.lastIndexOf(')')
  const pid = Number.parseInt(text, 10)
  if (close < 0 || !Number.isInteger(pid)) return null
  // From field 3 on: state, ppid, …, utime (14), stime (15), cutime (16), cstime (17).
  const fields = text.slice(close + 2).split(' ')
  const [ppid, utime, stime, cutime, cstime] = [1, 11, 12, 13, 14].map((i) => Number(fields[i]))
  if (![ppid, utime, stime, cutime, cstime].every(Number.isFinite)) return null
  return { pid, ppid: ppid!, ticks: utime! + stime! + cutime! + cstime! }
}

/** The ticks of `root` and of all its descendants among `processes` (those whose parents lead to it). */
export function treeTicks(root: number, processes: readonly ProcStat[]): number {
  const children = new Map<number, ProcStat[]>()
  let total = 0
  for (const p of processes) {
    if (p.pid === root) total += p.ticks
    else children.set(p.ppid, [...(children.get(p.ppid) ?? []), p])
  }
  const pending = [root]
  for (let pid = pending.pop(); pid !== undefined; pid = pending.pop()) {
    for (const child of children.get(pid) ?? []) {
      total += child.ticks
      pending.push(child.pid)
    }
  }
  return total
}

/** Every process /proc lists now; one that ends while it is read is left out (its time is in its parent's by the next reading). */
function readProcesses(): ProcStat[] {
  const processes: ProcStat[] = []
  for (const name of readdirSync('/proc')) {
    const first = name.charCodeAt(0)
    if (first < 48 || first > 57) continue // not a pid
    try {
      const stat = parseProcStat(readFileSync(`/proc/${name}/stat`, 'latin1'))
      if (stat) processes.push(stat)
    } catch {
      // gone meanwhile
    }
  }
  return processes
}

const HAS_PROC = process.platform === 'linux' && (() => {
  try {
    return parseProcStat(readFileSync('/proc/self/stat', 'latin1'))?.pid === process.pid
  } catch {
    return false
  }
})()

/**
 * Milliseconds of CPU the host's process tree has used so far: on Linux read from /proc (one
 * pass over /proc/<pid>/stat, a few milliseconds every 2 s sample); elsewhere, where Node reads no
 * other process's CPU time, the host process's alone.
 */
export function readOwnTreeCpuMs(): number {
  if (!HAS_PROC) {
    const usage = process.cpuUsage()
    return (usage.user + usage.system) / 1000
  }
  return treeTicks(process.pid, readProcesses()) * MS_PER_TICK
}
