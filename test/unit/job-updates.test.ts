/**
 * rows.ts `updateJob` writes a job's changed columns with an UPDATE made once per list of
 * columns, in the order the changes name them. Whatever that order, and however many columns,
 * the row in the table and the row it returns must be the same.
 *
 * White-box: the row layer is the subject, reached through engineContext.
 */
import { expect, test } from 'vitest'
import type { JobRow } from '../../src-main/db/schema'
import { engineContext } from '../../src-main/engine/internals'
import { getJob, updateJob } from '../../src-main/engine/store/rows'
import { aJob, setup } from '../helpers/engine'

function update(engine: ReturnType<typeof setup>['engine'], jobId: string, changes: Partial<JobRow>): { returned: JobRow; stored: JobRow } {
  const ctx = engineContext(engine)
  const returned = ctx.transact(() => updateJob(ctx, getJob(ctx, jobId), changes))
  return { returned, stored: ctx.transact(() => getJob(ctx, jobId)) }
}

test('an update stores each changed column in its own place, whatever order the changes name them in', () => {
  const { engine, clock } = setup()
  const { job } = engine.submit(aJob())
  const first = update(engine, job.id, { note: 'a', progress: 0.25 })
  expect(first.stored).toEqual(first.returned)
  expect(first.stored).toMatchObject({ note: 'a', progress: 0.25 })
  // The same columns named the other way round: a statement made for the first order would
  // write each value into the other's column.
  clock.advance(1000)
  const second = update(engine, job.id, { progress: 0.5, note: 'b' })
  expect(second.stored).toEqual(second.returned)
  expect(second.stored).toMatchObject({ note: 'b', progress: 0.5, updated_at: first.stored.updated_at + 1000 })
})

test('an update of more columns than a statement key holds still stores each one', () => {
  const { engine } = setup()
  const { job } = engine.submit(aJob())
  const changes: Partial<JobRow> = {
    note: 'n', progress: 0.75, metrics: '{"m":1}', result: '{"r":2}', error: 'e', max_runtime_s: 9, tags: '["t"]',
    constraints: '{"c":3}', payload: '{"p":4}', run_at: 5, next_retry_at: 6, final_status: 'DONE',
  }
  const { returned, stored } = update(engine, job.id, changes)
  expect(stored).toEqual(returned)
  expect(stored).toMatchObject(changes)
})

test('a change that names no column of the table is refused, and nothing is written', () => {
  const { engine } = setup()
  const { job } = engine.submit(aJob())
  const ctx = engineContext(engine)
  const before = ctx.transact(() => getJob(ctx, job.id))
  expect(() => update(engine, job.id, { note: 'x', nonsense: 1 } as Partial<JobRow>)).toThrow(/no column nonsense/)
  expect(ctx.transact(() => getJob(ctx, job.id))).toEqual(before)
})
