import { readdirSync, readFileSync } from 'node:fs'

/**
 * The process group an `exec` program leads (it is started `detached`, so its group's id is its
 * pid) and how it is ended: SIGTERM to the whole group, then SIGKILL after a grace.
 *
 * A pid, and so a group's id, is reused once its process is gone. A group is only ever signalled
 * while it is known to be the one started: its leader not yet reaped (its parent knows that), or
 * — for whoever is not its parent, the host or a worker's other threads — the process now under
 * that pid started at the same instant as the one recorded (Linux, `/proc/<pid>/stat`). While a
 * group's leader holds its pid, no other group can take that id. Elsewhere a group is known to
 * its parent only.
 */
export interface ProcessGroup {
  /** The group's id: its leader's pid. */
  pgid: number
  /** When the leader started (Linux: clock ticks since boot, from `/proc`); null where unknown. */
  started: string | null
}

/** How long a group has between its SIGTERM and its SIGKILL. */
export const GROUP_GRACE_MS = 2000

interface Stat {
  ppid: number
  pgrp: number
  started: string
  /** Exited, not yet reaped: holds its pid, runs nothing. */
  zombie: boolean
}

/** A process's group and start from `/proc/<pid>/stat`, or null: gone, or no `/proc` here. */
function statOf(pid: number): Stat | null {
  let text: string
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8')
  } catch {
    return null
  }
  // The command name (field 2) is in parentheses and may hold spaces and parentheses itself.
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ')
  // From field 3 on: state is field 3, ppid field 4, pgrp field 5, starttime field 22.
  const ppid = Number(fields[1])
  const pgrp = Number(fields[2])
  const started = fields[19]
  return Number.isInteger(pgrp) && started ? { ppid, pgrp, started, zombie: fields[0] === 'Z' } : null
}

/** When a process started, to tell it later from another given its pid; null where that cannot be known. */
export function processStarted(pid: number): string | null {
  return statOf(pid)?.started ?? null
}

/** Whether `pid` is still the process that started at `started`, and running. */
function stillRuns(pid: number, started: string): boolean {
  const stat = statOf(pid)
  return stat?.started === started && !stat.zombie
}

/** Whether the group's leader is still the process recorded (alive, or exited and not yet reaped). */
export function stillLeads(group: ProcessGroup): boolean {
  const stat = statOf(group.pgid)
  return group.started !== null && stat?.started === group.started && stat.pgrp === group.pgid
}

/** The group this process is in: never one to signal from here. */
const ownGroup = statOf(process.pid)?.pgrp ?? null

/** Every process now, each with its stat (Linux; none elsewhere). */
function processes(): (Stat & { pid: number })[] {
  let pids: string[]
  try {
    pids = readdirSync('/proc').filter((name) => /^\d+$/.test(name))
  } catch {
    return []
  }
  return pids.flatMap((name) => {
    const stat = statOf(Number(name))
    return stat ? [{ pid: Number(name), ...stat }] : []
  })
}

/** The processes in the group now, each with its start (Linux; none elsewhere). */
function membersOf(pgid: number): { pid: number; started: string }[] {
  return processes().flatMap((p) => (p.pgrp === pgid ? [{ pid: p.pid, started: p.started }] : []))
}

/**
 * The groups this process's children lead (Linux; none elsewhere): the programs it started
 * detached, each known here whether or not its start has been told yet. A child not yet reaped
 * holds its pid, so each is the one started.
 */
export function groupsOfChildren(): ProcessGroup[] {
  return processes().flatMap((p) => (p.ppid === process.pid && p.pgrp === p.pid && !p.zombie ? [{ pgid: p.pid, started: p.started }] : []))
}

function signal(target: number, name: NodeJS.Signals): void {
  try {
    process.kill(target, name)
  } catch {
    // Gone already (ESRCH), or not ours to signal (EPERM): nothing more to end.
  }
}

const delay = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/**
 * Ends a group: SIGTERM to all of it, then, after `graceMs`, SIGKILL to what is left — the group,
 * while `leads()` says its leader still holds its id, and each process that was in it at the
 * SIGTERM and is still the same process (one that outlives a leader that exited on SIGTERM is
 * still found). Nothing is signalled unless `leads()` holds at the start. Resolves once nothing of
 * the group is left, or after the SIGKILL.
 *
 * `leads`: the parent's own knowledge (its child's exit not yet seen), or {@link stillLeads}.
 */
export async function endGroup(group: ProcessGroup, leads: () => boolean, graceMs = GROUP_GRACE_MS): Promise<void> {
  if (group.pgid <= 1 || group.pgid === ownGroup || !leads()) return
  // Read while the leader holds the group's id: every process in it is the job's.
  const members = membersOf(group.pgid).filter((m) => m.pid !== process.pid)
  signal(-group.pgid, 'SIGTERM')
  const left = () => members.some((m) => stillRuns(m.pid, m.started)) || (members.length === 0 && leads())
  for (let waited = 0; waited < graceMs && left(); waited += 50) await delay(50)
  if (leads()) signal(-group.pgid, 'SIGKILL')
  for (const member of members) if (stillRuns(member.pid, member.started)) signal(member.pid, 'SIGKILL')
}

/** Ends groups that another process started: each only while its leader is the one recorded. */
export function endGroups(groups: Iterable<ProcessGroup>, graceMs = GROUP_GRACE_MS): Promise<void> {
  return Promise.all([...groups].map((group) => endGroup(group, () => stillLeads(group), graceMs))).then(() => {})
}
