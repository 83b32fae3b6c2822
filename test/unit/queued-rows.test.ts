/**
 * The rows of QUEUED jobs the engine keeps for the pick (engine/memory/queued-rows.ts) stay within their
 * memory budget: a backlog keeps its oldest rows, those a pick takes first, and the others are
 * read from the table, in the kept rows' shape. That they are always the table's rows is checked
 * by the tally's walk (job-tally.test.ts).
 *
 * White-box by purpose: the kept rows are the engine's memory, read through engineContext.
 */
import { expect, test } from 'vitest'
import type { JobRow } from '../../src-main/db/schema'
import type { Engine } from '../../src-main/engine'
import { engineContext } from '../../src-main/engine/internals'
import { eligibleJobs } from '../../src-main/engine/reads/pick'
import { QueuedRows } from '../../src-main/engine/memory/queued-rows'
import { findJob } from '../../src-main/engine/store/rows'
import { aJob, setup } from '../helpers/engine'
import { database } from '../helpers/database'

/** The table's row of each of these jobs. */
function rowsOf(engine: Engine, ids: string[]): JobRow[] {
  const read = database(engine).prepare('SELECT * FROM jobs WHERE id = ?')
  return ids.map((id) => read.get(id) as JobRow)
}

test('rows past the budget are not kept, and a row that leaves QUEUED frees its room for the next', () => {
  const { engine } = setup()
  const jobs = rowsOf(engine, Array.from({ length: 5 }, () => engine.submit(aJob()).job.id))
  const rows = new QueuedRows(3 * 750) // room for three of these small rows (~700 bytes each as counted)
  for (const job of jobs) rows.jobWritten(undefined, job)
  expect(jobs.map((job) => rows.get(job.seq) !== undefined)).toEqual([true, true, true, false, false])

  engine.claimBatch({ worker_id: 'w' }, 1)
  const [taken] = rowsOf(engine, [jobs[0]!.id])
  expect(taken!.state).toBe('RUNNING')
  rows.jobWritten(jobs[0], taken!) // no longer QUEUED: it leaves, and its room is free
  expect(rows.get(jobs[0]!.seq)).toBeUndefined()
  rows.jobWritten(undefined, jobs[3]!)
  expect(rows.get(jobs[3]!.seq)).toBe(jobs[3])
  expect(rows.size).toBe(3)

  rows.clear()
  expect(rows.size).toBe(0)
  rows.jobWritten(undefined, jobs[4]!)
  expect(rows.get(jobs[4]!.seq)).toBe(jobs[4])
})

test('a pick takes the rows it keeps from memory and reads the others from the table, in order', () => {
  const { engine } = setup()
  const ctx = engineContext(engine)
  const ids = Array.from({ length: 6 }, () => engine.submit(aJob()).job.id)
  const jobs = rowsOf(engine, ids)
  ctx.queuedRows.clear()
  for (const job of [jobs[1]!, jobs[4]!]) ctx.queuedRows.jobWritten(undefined, job)
  const granted = engine.claimBatch({ worker_id: 'w' }, 6).granted
  expect(granted.map((grant) => grant.job_id)).toEqual(ids)
  expect(ctx.queuedRows.size).toBe(0)
})

test('a job row read back from the table has its columns in the order of the rows the engine writes (one V8 shape for the verbs)', () => {
  const { engine, clock } = setup()
  const ctx = engineContext(engine)
  const [readBack, byId] = [engine.submit(aJob()).job.id, engine.submit(aJob()).job.id]
  ctx.queuedRows.clear() // neither row is kept now: a pick and a lookup read them from the table
  const keptId = engine.submit(aJob()).job.id // written after the clear: kept
  const written = Object.keys(ctx.queuedRows.get(findJob(ctx, keptId)!.seq)!)

  const [picked] = eligibleJobs(ctx, { worker_id: 'w' }, clock.now())
  expect(picked!.id).toBe(readBack)
  expect(Object.keys(picked!)).toEqual(written)
  expect(Object.keys(findJob(ctx, byId)!)).toEqual(written)
  // The table's own order is another one (migrations add columns at its end): `SELECT *` would not do.
  expect(Object.keys(rowsOf(engine, [byId])[0]!)).not.toEqual(written)
})

test('a bulk backlog of 20,000 small jobs is kept whole: a pool drains it without reading a row back', () => {
  const { engine } = setup()
  for (let i = 0; i < 20; i++) engine.submitMany(Array.from({ length: 1_000 }, () => aJob()))
  expect(engineContext(engine).queuedRows.size).toBe(20_000)
})
