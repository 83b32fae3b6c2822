/**
 * The rules of the jobs table that its readers rely on: a job has `claim_expires_at` exactly
 * while a queue API claim holds it (the partial index jobs_claim_expiry, db/schema.ts), and
 * `finished_at` exactly while it is finished (retention's sweep reads it, engine/verbs/prune.ts). A
 * walk through every verb that moves a job keeps them at each step, and the reaper reads the
 * claimed jobs by their index.
 */
import { describe, expect, test } from 'vitest'
import { SECOND } from '../../src-main/engine/rules/clock'
import type { Engine } from '../../src-main/engine'
import { aJob, seededRandom, setup, T0 } from '../helpers/engine'
import { database } from '../helpers/database'

const CLAIM_STATES = "('CLAIMED', 'PREPARING', 'LEASE_PENDING')"
const FINISHED_STATES = "('DONE', 'FAILED', 'CANCELED', 'TIMEOUT')"

function breaches(engine: Engine): { id: string; state: string; claim_expires_at: number | null; finished_at: number | null }[] {
  return database(engine)
    .prepare(
      `SELECT id, state, claim_expires_at, finished_at FROM jobs
       WHERE (claim_expires_at IS NOT NULL) != (state IN ${CLAIM_STATES}) OR (finished_at IS NOT NULL) != (state IN ${FINISHED_STATES})`,
    )
    .all() as ReturnType<typeof breaches>
}

describe('jobs rows keep the rules their partial indexes rely on', () => {
  test('claim_expires_at only while claimed, finished_at only while finished, through every verb that moves a job', () => {
    const { engine, clock } = setup({ total_units: 6 })
    const next = seededRandom(7)
    const pick = <T>(items: T[]): T | undefined => items[Math.floor(next() * items.length)]
    const jobs = () => database(engine).prepare('SELECT id, state, claimed_by FROM jobs').all() as { id: string; state: string; claimed_by: string | null }[]
    const states = new Set<string>()
    for (let step = 0; step < 500; step++) {
      const job = pick(jobs())
      const worker = `w${Math.floor(next() * 2)}`
      const choices: (() => unknown)[] = [
        () => engine.submit(aJob({ cost_units: 1 + Math.floor(next() * 2), max_attempts: 2 })),
        () => engine.claim({ worker_id: worker }, 2),
        () => engine.claimAndLease({ worker_id: worker }),
        () => clock.advance(Math.floor(next() * 40) * SECOND),
        () => engine.reap(),
      ]
      if (job) {
        const lease = engine.activeLeases().find((lease) => lease.job_id === job.id)
        choices.push(
          () => engine.updateStatus(job.id, { state: pick(['PREPARING', 'LEASE_PENDING'] as const), worker_id: job.claimed_by ?? worker }),
          () => engine.requestLeaseForJob({ job_id: job.id, worker_id: job.claimed_by ?? worker }),
          () => engine.cancel(job.id),
          () => engine.retry(job.id),
        )
        if (lease) {
          const report = { job_id: job.id, attempt_id: lease.attempt_id, worker_id: lease.worker_id, lease_token: lease.token }
          choices.push(
            () => engine.complete(report),
            () => engine.fail({ ...report, error: { code: 'boom', retryable: next() < 0.5 } }),
            () => engine.expireLeasesOfWorker(lease.worker_id),
          )
        }
      }
      try {
        pick(choices)!()
      } catch {
        // a refusal is part of the walk
      }
      for (const { state } of jobs()) states.add(state)
      expect(breaches(engine), `step ${step}`).toEqual([])
    }
    // The walk went through the states the rules are about.
    for (const state of ['CLAIMED', 'PREPARING', 'LEASE_PENDING', 'RUNNING', 'QUEUED', 'DONE', 'FAILED', 'CANCELED']) expect(states).toContain(state)
  })

  test("the reaper's queries read the claimed jobs through their index", () => {
    const { engine } = setup()
    const plan = (sql: string, ...params: unknown[]) =>
      (database(engine).prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...params) as { detail: string }[]).map((row) => row.detail).join('\n')
    expect(plan(`SELECT * FROM jobs WHERE state IN ${CLAIM_STATES} AND claim_expires_at <= ? ORDER BY claim_expires_at LIMIT 100`, T0)).toContain(
      'USING INDEX jobs_claim_expiry (claim_expires_at<?)',
    )
    expect(plan('SELECT MIN(claim_expires_at) FROM jobs WHERE claim_expires_at IS NOT NULL')).toContain('USING COVERING INDEX jobs_claim_expiry')
  })
})
