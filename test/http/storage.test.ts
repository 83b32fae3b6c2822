/**
 * GET /api/storage: the database's size on disk (file + WAL) and the retention setting, with the
 * pruner's last pass (docs/retention.md). The host's clock is manual: a pass deletes what is old
 * by that clock.
 */
import { statSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, test } from 'vitest'
import { DAY, ManualClock } from '../../src-main/engine/rules/clock'
import { StorageAnswer } from '../../src-main/http/system'
import { startTestHost, type TestHost } from '../helpers/host'
import { until } from '../helpers/until'

let host: TestHost
afterEach(async () => {
  await host?.dispose()
})

async function storage(): Promise<StorageAnswer> {
  const res = await host.call('/api/storage')
  expect(res.status).toBe(200)
  return StorageAnswer.parse(await res.json())
}

/** Runs `count` jobs to DONE through the engine, as a worker would. */
function finish(count: number): void {
  host.engine.submitMany(Array.from({ length: count }, () => ({ job_type: 'noop', cost_units: 1 })))
  for (const { job_id, attempt_id, lease_token } of host.engine.claimBatch({ worker_id: 'w' }, count).granted) {
    host.engine.complete({ job_id, worker_id: 'w', attempt_id, lease_token })
  }
}

describe('GET /api/storage', () => {
  test('answers the file and WAL sizes as they are on disk, and the retention setting', async () => {
    host = await startTestHost({ retainDays: 3 })
    finish(20)
    const file = join(host.dataDir, 'leasehold.db')
    // The checkpointer's thread may copy pages into the file between the answer and the stat:
    // the answer must match the disk as it was at some moment, so asking again may be needed.
    const onDisk = () => ({ file_bytes: statSync(file).size, wal_bytes: statSync(`${file}-wal`).size })
    const answer = await until(async () => {
      const before = onDisk()
      const seen = await storage()
      const after = onDisk()
      return before.file_bytes === after.file_bytes && before.wal_bytes === after.wal_bytes ? { seen, disk: after } : null
    }, 5_000, 'a moment with no checkpoint under way')
    expect(answer.seen).toMatchObject({ retain_days: 3, stats_retain_days: 90, auto_vacuum: 'incremental', last_prune: null })
    expect(answer.seen).toMatchObject(answer.disk)
    expect(answer.seen.database_bytes).toBe(answer.seen.file_bytes + answer.seen.wal_bytes)
  })

  test('after a pass, the pass: when it ran by the host\'s clock, and what it deleted', async () => {
    const clock = new ManualClock(Date.parse('2026-03-01T00:00:00.000Z'))
    host = await startTestHost({ retainDays: 1 }, { clock })
    finish(20)
    clock.advance(2 * DAY)
    await host.pruner.runPass()
    const answer = await storage()
    expect(answer.last_prune).toEqual({
      at: '2026-03-03T00:00:00.000Z',
      retain_days: 1,
      jobs_deleted: 20, // every one: none is kept for holding the newest event
      events_deleted: 1, // the CAPACITY_CHANGED of the test host's --busy 0, at its start
      stats_rows: 0,
      pages_returned: 0,
      longest_step_ms: expect.any(Number),
      longest_checkpoint_ms: expect.any(Number),
      duration_ms: expect.any(Number),
    })
    expect((await host.call('/api/scheduler/jobs?limit=100').then((r) => r.json())).jobs).toHaveLength(0)
  })

  test("a pass that deletes says so in the host's log: how many, older than what, and the flag that sets it", async () => {
    const clock = new ManualClock(Date.parse('2026-03-01T00:00:00.000Z'))
    const lines: string[] = []
    host = await startTestHost({ retainDays: 1 }, { clock, log: (line) => lines.push(line) })
    finish(20)
    clock.advance(2 * DAY)
    await host.pruner.runPass()
    expect(lines.filter((line) => line.includes('retention'))).toEqual([
      'leasehold: retention deleted 20 finished jobs and 1 event that named no job, older than 1 day (before 2026-03-02T00:00:00.000Z); --retain-days sets how long they are kept (0 keeps every job)',
    ])
  })

  test('--retain-days 0 is reported, and a pass deletes nothing', async () => {
    const clock = new ManualClock(Date.parse('2026-03-01T00:00:00.000Z'))
    host = await startTestHost({ retainDays: 0 }, { clock })
    finish(5)
    clock.advance(400 * DAY)
    await host.pruner.runPass()
    expect(await storage()).toMatchObject({ retain_days: 0, last_prune: { jobs_deleted: 0 } })
  })

  test('is in the OpenAPI document with its response schema', async () => {
    host = await startTestHost()
    const doc = await (await host.call('/api/openapi.json')).json()
    const schema = doc.paths['/api/storage'].get.responses['200'].content['application/json'].schema
    const resolved = schema.$ref ? doc.components.schemas[schema.$ref.split('/').pop()] : schema
    expect(resolved.required).toEqual(expect.arrayContaining(['database_bytes', 'file_bytes', 'wal_bytes', 'retain_days', 'last_prune']))
  })
})
