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

/**
 * Reads the host's tree from /proc without reading every process on the machine each time (a
 * read of /proc/<pid>/stat costs ~35–70 µs, and a desktop runs hundreds). A process found outside
 * the tree never enters it: a process's parent changes only when its parent dies, and then to an
 * ancestor of its own that reaps orphans, never to a process of another tree. So each reading
 * lists /proc and reads the stat of the pids not known to be outside: the tree's own, and those
 * new since the reading before. A pid that ended and was given to a new process between two
 * readings would keep the new process out; every {@link FULL_READ_EVERY}th reading reads every
 * process again, and forgets the pids that ended.
 */
export class TreeReader {
  /** The pids found outside the tree. */
  private outside = new Set<number>()
  private readings = 0

  constructor(
    private readonly root: number,
    private readonly proc: { list(): string[]; stat(pid: number): string | null } = realProc,
  ) {}

  /** Clock ticks of CPU the tree has used so far (see {@link ProcStat.ticks}). */
  ticks(): number {
    if (this.readings++ % FULL_READ_EVERY === 0) this.outside.clear()
    const read: ProcStat[] = []
    for (const name of this.proc.list()) {
      const first = name.charCodeAt(0)
      if (first < 48 || first > 57) continue // not a pid
      const pid = Number(name)
      if (this.outside.has(pid)) continue
      const text = this.proc.stat(pid)
      const stat = text === null ? null : parseProcStat(text)
      if (stat) read.push(stat)
    }
    const inTree = treePids(this.root, read)
    let total = 0
    for (const p of read) {
      if (inTree.has(p.pid)) total += p.ticks
      else this.outside.add(p.pid)
    }
    return total
  }
}

/** How often (in readings) a {@link TreeReader} reads every process again: every 30 s at the busy sampler's pace of 2 s. */
export const FULL_READ_EVERY = 15

/** The pids of `root` and of all its descendants among `processes`. */
function treePids(root: number, processes: readonly ProcStat[]): Set<number> {
  const children = new Map<number, number[]>()
  for (const p of processes) if (p.pid !== root) children.set(p.ppid, [...(children.get(p.ppid) ?? []), p.pid])
  const tree = new Set<number>([root])
  for (const pid of tree) for (const child of children.get(pid) ?? []) tree.add(child)
  return tree
}

/** /proc as a {@link TreeReader} reads it; a process that ends while it is read reads as null (its time is in its parent's by the next reading). */
const realProc = {
  list: (): string[] => readdirSync('/proc'),
  stat(pid: number): string | null {
    try {
      return readFileSync(`/proc/${pid}/stat`, 'latin1')
    } catch {
      return null
    }
  },
}

const HAS_PROC = process.platform === 'linux' && (() => {
  try {
    return parseProcStat(readFileSync('/proc/self/stat', 'latin1'))?.pid === process.pid
  } catch {
    return false
  }
})()

const ownTree = HAS_PROC ? new TreeReader(process.pid) : null

/**
 * Milliseconds of CPU the host's process tree has used so far: on Linux read from /proc (the
 * tree's processes and those new since the last reading: {@link TreeReader}); elsewhere, where
 * Node reads no other process's CPU time, the host process's alone.
 */
export function readOwnTreeCpuMs(): number {
  if (!ownTree) {
    const usage = process.cpuUsage()
    return (usage.user + usage.system) / 1000
  }
  return ownTree.ticks() * MS_PER_TICK
}
