/** The busy rating leaves out the CPU of the host's whole process tree: the host, its local workers and the programs they start. */
import { expect, test } from 'vitest'
import { CpuBusyMeter, type CpuTimes } from '../../src-main/busy/measure'
import { parseProcStat, type ProcStat, treeTicks } from '../../src-main/busy/own-tree'

/** A /proc/<pid>/stat line with the fields the tree reads; the rest are zeros. */
const statLine = (pid: number, name: string, ppid: number, [utime, stime, cutime, cstime]: number[]) =>
  `${pid} (${name}) R ${ppid} ${pid} ${pid} 0 -1 4194304 0 0 0 0 ${utime} ${stime} ${cutime} ${cstime} 20 0 1 0 100 0 0\n`

test("a process's ticks are its own and its reaped children's, read after the last ')' of its name", () => {
  expect(parseProcStat(statLine(42, 'a) (b c', 7, [100, 20, 3, 4]))).toEqual({ pid: 42, ppid: 7, ticks: 127 })
  expect(parseProcStat('not a stat line')).toBeNull()
})

test("the host's tree is the host and every process descended from it, and no other", () => {
  const processes: ProcStat[] = [
    { pid: 1, ppid: 0, ticks: 1000 }, // init
    { pid: 10, ppid: 1, ticks: 5 }, // the host
    { pid: 11, ppid: 10, ticks: 20 }, // a local worker
    { pid: 12, ppid: 11, ticks: 300 }, // its exec program
    { pid: 13, ppid: 12, ticks: 4000 }, // what that program started
    { pid: 14, ppid: 1, ticks: 70 }, // the user's editor
    { pid: 15, ppid: 14, ticks: 9 }, // and its helper
  ]
  expect(treeTicks(10, processes)).toBe(5 + 20 + 300 + 4000)
  expect(treeTicks(99, processes)).toBe(0)
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
