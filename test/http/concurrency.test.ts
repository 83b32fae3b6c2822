/**
 * Concurrency over real HTTP: many workers at once. A job is claimed or leased exactly once,
 * a drain of 2,000 jobs through the worker API completes each exactly once, and the ACTIVE
 * leases never hold more units than are usable.
 */
import { afterEach, describe, expect, test } from 'vitest'
import { startTestHost, type TestHost } from '../helpers/host'
import { body, post, PULL, QUEUE, WORKER } from './support'
import { database } from '../helpers/database'

let host: TestHost
afterEach(async () => {
  await host?.dispose()
})

function submitMany(count: number, extra: Record<string, unknown> = {}): string[] {
  const ids: string[] = []
  for (let i = 0; i < count; i++) ids.push(host.engine.submit({ job_type: 'generic', cost_units: 1, ...extra }).job.id)
  return ids
}

function activeUnits(): number {
  return (database(host.engine).prepare("SELECT COALESCE(SUM(cost_units), 0) AS n FROM leases WHERE state = 'ACTIVE'").get() as { n: number }).n
}

function jobDoneCounts(): Map<string, number> {
  const rows = database(host.engine).prepare("SELECT job_id, COUNT(*) AS n FROM events WHERE event_type = 'JOB_DONE' GROUP BY job_id").all() as {
    job_id: string
    n: number
  }[]
  return new Map(rows.map((r) => [r.job_id, r.n]))
}

describe('parallel claims', () => {
  test('60 parallel queue API claims from different workers for 20 jobs: each job is claimed exactly once, the rest get 204', async () => {
    host = await startTestHost({ totalUnits: 100, busy: 0 })
    const ids = submitMany(20)
    const answers = await Promise.all(
      Array.from({ length: 60 }, (_, i) => post(host, `${QUEUE}/jobs/claim`, { worker_id: `w-${i}` }).then(async (r) => ({ status: r.status, body: await body(r), worker: `w-${i}` }))),
    )
    const won = answers.filter((a) => a.status === 200)
    expect(won).toHaveLength(20)
    expect(answers.filter((a) => a.status === 204)).toHaveLength(40)
    expect(new Set(won.map((a) => a.body.job.job_id))).toEqual(new Set(ids))
    for (const a of won) {
      expect(a.body.job.claimed_by).toBe(a.worker)
      expect(host.engine.getJob(a.body.job.job_id)).toMatchObject({ state: 'CLAIMED', claimed_by: a.worker })
    }
    const claimedEvents = database(host.engine).prepare("SELECT COUNT(*) AS n FROM events WHERE event_type = 'JOB_CLAIMED'").get() as { n: number }
    expect(claimedEvents.n).toBe(20)
  })

  test('60 parallel pull API lease requests for 20 jobs: each job is leased exactly once, the rest are denied', async () => {
    host = await startTestHost({ totalUnits: 100, busy: 0 })
    const ids = submitMany(20)
    const answers = await Promise.all(
      Array.from({ length: 60 }, (_, i) => post(host, `${PULL}/request`, { worker_id: `w-${i}` }).then(async (r) => ({ status: r.status, body: await body(r), worker: `w-${i}` }))),
    )
    expect(answers.every((a) => a.status === 200)).toBe(true)
    const granted = answers.filter((a) => a.body.denied === false)
    expect(granted).toHaveLength(20)
    expect(answers.filter((a) => a.body.denied === true)).toHaveLength(40)
    expect(new Set(granted.map((a) => a.body.job.job_id))).toEqual(new Set(ids))
    expect(new Set(granted.map((a) => a.body.lease.lease_id)).size).toBe(20)
    for (const a of granted) expect(a.body.lease.worker_id).toBe(a.worker)
    expect(host.engine.getCapacity().leased).toBe(20)
    const fences = database(host.engine).prepare('SELECT fence FROM leases ORDER BY fence').all() as { fence: number }[]
    expect(new Set(fences.map((f) => f.fence)).size).toBe(20)
  })

  test('60 parallel pull API requests with room for only 7 units grant exactly 7 leases', async () => {
    host = await startTestHost({ totalUnits: 7, busy: 0 })
    submitMany(20)
    const answers = await Promise.all(Array.from({ length: 60 }, (_, i) => post(host, `${PULL}/request`, { worker_id: `w-${i}` }).then(body)))
    expect(answers.filter((a) => a.denied === false)).toHaveLength(7)
    expect(activeUnits()).toBe(7)
  })
})

describe('draining through the worker API', () => {
  test(
    '32 workers drain 2,000 jobs (claim with max_wait_ms → heartbeat → complete): each completed exactly once, capacity never exceeded',
    async () => {
      const TOTAL = 2000
      const USABLE = 16 // fewer units than workers: capacity is the bottleneck
      host = await startTestHost({ totalUnits: USABLE, busy: 0 })
      const ids = submitMany(TOTAL / 2)

      let completed = 0
      let stop = false
      const violations: string[] = []
      let samples = 0
      const sampler = (async () => {
        while (!stop) {
          const units = activeUnits()
          if (units > USABLE) violations.push(`db: ${units} active units > ${USABLE}`)
          const cap = await body(await host.call('/api/capacity'))
          if (cap.leased > cap.usable) violations.push(`api: leased ${cap.leased} > usable ${cap.usable}`)
          if (cap.usable !== USABLE) violations.push(`api: usable ${cap.usable}`)
          samples++
          await new Promise((r) => setTimeout(r, 25))
        }
      })()

      // The second half is submitted over HTTP while the workers run, so waiting claims get woken.
      const submitter = (async () => {
        const batch = 8
        for (let i = 0; i < TOTAL / 2; i += batch) {
          const answers = await Promise.all(
            Array.from({ length: batch }, () => post(host, `${QUEUE}/jobs/submit`, { job_type: 'generic', cost_units: 1 }).then(body)),
          )
          for (const a of answers) ids.push(a.job.job_id)
        }
      })()

      const perWorker = new Map<string, number>()
      const worker = async (name: string) => {
        while (completed < TOTAL) {
          const c = await body(await post(host, `${WORKER}/claim`, { worker_id: name, streams: ['default'], max_wait_ms: 300 }))
          if (!c.claimed) continue
          const hb = await post(host, `${WORKER}/heartbeat`, { worker_id: name, job_id: c.job_id, lease_token: c.lease_token })
          expect(hb.status).toBe(200)
          const done = await post(host, `${WORKER}/complete`, {
            worker_id: name,
            job_id: c.job_id,
            attempt_id: c.attempt_id,
            lease_token: c.lease_token,
            stream: c.stream,
            message_id: c.message_id,
            result: { by: name },
          })
          expect(await body(done)).toEqual({ ok: true, ack: true })
          completed++
          perWorker.set(name, (perWorker.get(name) ?? 0) + 1)
        }
      }
      await Promise.all([submitter, ...Array.from({ length: 32 }, (_, i) => worker(`drain-${i}`))])
      stop = true
      await sampler

      expect(violations).toEqual([])
      expect(samples).toBeGreaterThan(10)
      expect(completed).toBe(TOTAL)
      expect(ids).toHaveLength(TOTAL)
      const counts = jobDoneCounts()
      expect(counts.size).toBe(TOTAL)
      for (const id of ids) expect(counts.get(id), id).toBe(1)
      const states = database(host.engine).prepare('SELECT state, COUNT(*) AS n, MAX(attempts) AS maxAttempts FROM jobs GROUP BY state').all()
      expect(states).toEqual([{ state: 'DONE', n: TOTAL, maxAttempts: 1 }])
      expect(activeUnits()).toBe(0)
      expect(perWorker.size).toBeGreaterThan(16) // the work was spread, not served by a few
    },
    120_000,
  )
})
