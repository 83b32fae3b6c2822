/** The busy rating leaves out the CPU of the host's whole process tree: the host, its local workers and the programs they start. */
import { expect, test } from 'vitest'
import { CpuBusyMeter, type CpuTimes } from '../../src-main/busy/measure'
import { FULL_READ_EVERY, parseProcStat, type ProcStat, TreeReader } from '../../src-main/busy/own-tree'

/** A /proc/<pid>/stat line with the fields the tree reads; the rest are zeros. */
const statLine = (pid: number, name: string, ppid: number, [utime, stime, cutime, cstime]: number[]) =>
  `${pid} (${name}) R ${ppid} ${pid} ${pid} 0 -1 4194304 0 0 0 0 ${utime} ${stime} ${cutime} ${cstime} 20 0 1 0 100 0 0\n`

test("a process's ticks are its own and its reaped children's, read after the last ')' of its name", () => {
  expect(parseProcStat(statLine(42, 'a) (b c', 7, [100, 20, 3, 4]))).toEqual({ pid: 42, ppid: 7, ticks: 127 })
  expect(parseProcStat('not a stat line')).toBeNull()
})

/** A /proc of these processes, which the test may change, counting the stat files read. */
function fakeProc(processes: ProcStat[]) {
  const proc = {
    processes,
    reads: [] as number[],
    list: () => ['self', 'stat', ...proc.processes.map((p) => String(p.pid))],
    stat(pid: number) {
      proc.reads.push(pid)
      const p = proc.processes.find((q) => q.pid === pid)
      return p ? statLine(p.pid, 'x', p.ppid, [p.ticks, 0, 0, 0]) : null
    },
  }
  return proc
}

const machine = (): ProcStat[] => [
  { pid: 1, ppid: 0, ticks: 1000 }, // init
  { pid: 10, ppid: 1, ticks: 5 }, // the host
  { pid: 11, ppid: 10, ticks: 20 }, // a local worker
  { pid: 12, ppid: 11, ticks: 300 }, // its exec program
  { pid: 13, ppid: 12, ticks: 4000 }, // what that program started
  { pid: 14, ppid: 1, ticks: 70 }, // the user's editor
  { pid: 15, ppid: 14, ticks: 9 }, // and its helper
]

test("the host's tree is the host and every process descended from it, and no other", () => {
  expect(new TreeReader(10, fakeProc(machine())).ticks()).toBe(5 + 20 + 300 + 4000)
  expect(new TreeReader(99, fakeProc(machine())).ticks()).toBe(0)
})

test('a reading reads again only the tree and the processes new since the last: a process outside the tree never enters it', () => {
  const proc = fakeProc(machine())
  const reader = new TreeReader(10, proc)
  reader.ticks()
  proc.reads = []
  proc.processes.push({ pid: 16, ppid: 12, ticks: 50 }, { pid: 17, ppid: 14, ticks: 1 }) // a new descendant, a new outsider
  expect(reader.ticks()).toBe(5 + 20 + 300 + 4000 + 50)
  expect(proc.reads.sort((a, b) => a - b)).toEqual([10, 11, 12, 13, 16, 17])
})

test('every so many readings every process is read again, so a pid an outsider had and a new descendant took is counted', () => {
  const proc = fakeProc(machine())
  const reader = new TreeReader(10, proc)
  reader.ticks()
  proc.processes = proc.processes.map((p) => (p.pid === 15 ? { pid: 15, ppid: 11, ticks: 7 } : p)) // the helper ended; its pid went to a worker's child
  for (let i = 1; i < FULL_READ_EVERY; i++) expect(reader.ticks()).toBe(4325)
  expect(reader.ticks()).toBe(4325 + 7)
})

/** A meter over a scripted series of readings: the first is where it starts. */
function meterOver(readings: CpuTimes[]): CpuBusyMeter {
  let next = 0
  return new CpuBusyMeter(() => readings[Math.min(next++, readings.length - 1)]!)
}

test("CPU the host's tree uses is not the user's load: a machine busy with the host's jobs alone reads 0", () => {
  // Two cores, 2 s a sample: 4000 ms of CPU each time, the host's tree using 3000 of them.
  const meter = meterOver([
    { total: 0, idle: 0, own: 0 },
    { total: 4000, idle: 1000, own: 3000 },
    { total: 8000, idle: 2000, own: 6000 },
  ])
  expect(meter.sample()).toBe(0)
  expect(meter.sample()).toBe(0)
})

test("the user's load beside the host's is measured, and smoothed as before", () => {
  const meter = meterOver([
    { total: 0, idle: 0, own: 0 },
    { total: 4000, idle: 0, own: 2000 }, // the user's 2000 of 4000: 5
    { total: 8000, idle: 0, own: 4000 },
  ])
  expect(meter.sample()).toBe(5)
  expect(meter.sample()).toBe(5)
})

test('a span in which the tree lost a process (its time left with it) leaves nothing out, never less than nothing', () => {
  const meter = meterOver([
    { total: 0, idle: 0, own: 5000 },
    { total: 4000, idle: 3000, own: 1000 },
  ])
  expect(meter.sample()).toBe(2.5) // what the machine read, as if the host had been idle
})
