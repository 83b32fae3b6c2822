/**
 * A handler's `log()` lines are bounded: each cut as a note is, each job's held to a rate, the
 * lines dropped counted in one line of their own (src-worker/run-log.ts).
 */
import { afterEach, expect, test } from 'vitest'
import { shortId } from '../../src-shared/short-id'
import { LOG_BURST_LINES, LOG_LINES_PER_S, MAX_LOG_LINE_CHARS, RunLog } from '../../src-worker/run-log'
import { cleanUp, dataDirWith, poolReady, settled, startHost, submit } from './support'

afterEach(() => cleanUp())

const HANDLERS = {
  'huge-line.mjs': "export default { type: 'test.huge-line', run: ({ log }) => { log('H'.repeat(5 * 1024 * 1024)); return null } }",
  'many-lines.mjs': "export default { type: 'test.many-lines', run: ({ log }) => { for (let i = 0; i < 200_000; i++) log(`line ${i}`); return null } }",
}

test("a handler's log line is cut as a note is, and a job's lines past a burst are dropped, counted in one line: the host's log stays small", async () => {
  const host = await startHost({ dataDir: dataDirWith(HANDLERS), workers: 1 })
  await poolReady(host, 1)
  const huge = await submit(host, { job_type: 'test.huge-line' })
  expect((await settled(host, huge, 20_000)).job.state).toBe('DONE')
  const hugeLines = host.lines.filter((line) => line.includes(`[test.huge-line ${shortId(huge)}]`))
  expect(hugeLines).toHaveLength(1)
  expect(hugeLines[0]).toMatch(new RegExp(`\\] H{${MAX_LOG_LINE_CHARS - '… (cut)'.length}}… \\(cut\\)$`))

  const many = await submit(host, { job_type: 'test.many-lines' })
  expect((await settled(host, many, 30_000)).job.state).toBe('DONE')
  const manyLines = host.lines.filter((line) => line.includes(`[test.many-lines ${shortId(many)}]`))
  // The burst at once (the loop takes well under a second, the steady rate adding a few more), then the count.
  expect(manyLines.length).toBeGreaterThanOrEqual(LOG_BURST_LINES + 1)
  expect(manyLines.length).toBeLessThan(LOG_BURST_LINES + 5 * LOG_LINES_PER_S)
  expect(manyLines[0]).toMatch(/\] line 0$/)
  // Each line the steady rate lets through after drops is preceded by their count; the run's end says the rest.
  const COUNT = new RegExp(`\\] … (\\d+) log line\\(s\\) of this job dropped: more than ${LOG_BURST_LINES} at once, or ${LOG_LINES_PER_S} a second after$`)
  expect(manyLines.at(-1)).toMatch(COUNT)
  const counted = manyLines.map((line) => COUNT.exec(line)).filter((m) => m !== null)
  const dropped = counted.reduce((sum, m) => sum + Number(m[1]), 0)
  expect(manyLines.length - counted.length + dropped).toBe(200_000)
})

test("a job's log lines past its burst are written at the steady rate, the count of those dropped before each line that is", () => {
  let now = 0
  const written: string[] = []
  const log = new RunLog((line) => written.push(line), () => now)
  for (let i = 0; i < LOG_BURST_LINES + 5; i++) log.line(`a${i}`)
  expect(written).toHaveLength(LOG_BURST_LINES)
  now += 1000 / LOG_LINES_PER_S // one line's worth
  log.line('b')
  log.line('c')
  expect(written.slice(LOG_BURST_LINES)).toEqual([`… 5 log line(s) of this job dropped: more than ${LOG_BURST_LINES} at once, or ${LOG_LINES_PER_S} a second after`, 'b'])
  log.flush()
  expect(written.at(-1)).toBe(`… 1 log line(s) of this job dropped: more than ${LOG_BURST_LINES} at once, or ${LOG_LINES_PER_S} a second after`)
  log.flush()
  expect(written).toHaveLength(LOG_BURST_LINES + 3)
})
