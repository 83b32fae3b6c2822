import Router from '@koa/router'
import { z } from 'zod'
import type { ClockWaiters } from '../workers/clock-waiters'
import { longPollMs } from '../workers/long-poll'
import { BLOCKER_STATES, type Engine, FILE_LEASE_STATES, RESOLUTIONS } from '../engine'
import { iso } from '../engine/clock'
import { clientGone, readJson, reply } from './body'
import { pathParam, validate } from './errors'
import { Id, MaxWaitMs, Note } from './schemas'
import {
  acquireRefusal,
  BlockerAnswer,
  BlockerListAnswer,
  BlockerResolved,
  blockerView,
  FileAcquireRefusal,
  FileLeaseAnswer,
  FileLeaseGranted,
  FileLeaseListAnswer,
  fileLeaseView,
  FileRetryWaitAnswer,
} from './views/files'
import { statusOf } from '../../src-shared/error-codes'
import { ABSOLUTE_PATH, FileAcquire, FileHeartbeat, FilePath, FileRelease, FileRetryWait, OwnerId } from '../../src-shared/worker-exchange'

// The files API (docs/file-leases.md): file leases and blocker halts.

// The gate's requests are the worker exchange's (src-shared/worker-exchange.ts): the local workers' IPC sends the same.
export { ABSOLUTE_PATH, FileAcquire, FileHeartbeat, FilePath, FileRelease, FileRetryWait, OwnerId }

export const FileLeaseList = z.strictObject({ state: z.enum([...FILE_LEASE_STATES, 'all']).default('ACTIVE') })
export type FileLeaseList = z.infer<typeof FileLeaseList>

export const BlockerList = z.strictObject({ state: z.enum([...BLOCKER_STATES, 'all']).default('all') })
export type BlockerList = z.infer<typeof BlockerList>

export const BlockerResolve = z.strictObject({ action: z.enum(RESOLUTIONS), note: Note.nullable().optional(), by: z.string().max(200).nullable().optional() })
export type BlockerResolve = z.infer<typeof BlockerResolve>

export function filesRouter(engine: Engine, clockWaiters: ClockWaiters, bodyLimit: number): Router {
  const router = new Router({ prefix: '/api' })
  const now = () => engine.now()

  router.post('/files/leases/acquire', async (ctx) => {
    const input = validate(FileAcquire, await readJson(ctx, bodyLimit))
    const result = engine.acquireFile(input)
    if (result.granted) reply(ctx, FileLeaseGranted, { granted: true, file_lease: fileLeaseView(result.file_lease, now()) })
    else reply(ctx, FileAcquireRefusal, acquireRefusal(result), statusOf(result.code))
  })

  // Not in the seed: lets a denied requester wait for its one retry by the host's clock.
  router.post('/files/leases/wait', async (ctx) => {
    const input = validate(FileRetryWait, await readJson(ctx, bodyLimit))
    const retryAt = engine.fileRetryAt(input.file, input.owner_id)
    const ready = retryAt === null || (await clockWaiters.waitUntil(retryAt, longPollMs(input.max_wait_ms), clientGone(ctx.res)))
    reply(ctx, FileRetryWaitAnswer, { ready, retry_at: iso(retryAt) })
  })

  router.post('/files/leases/heartbeat', async (ctx) => {
    const input = validate(FileHeartbeat, await readJson(ctx, bodyLimit))
    reply(ctx, FileLeaseAnswer, { ok: true, file_lease: fileLeaseView(engine.heartbeatFile(input), now()) })
  })

  router.post('/files/leases/release', async (ctx) => {
    const input = validate(FileRelease, await readJson(ctx, bodyLimit))
    reply(ctx, FileLeaseAnswer, { ok: true, file_lease: fileLeaseView(engine.releaseFile(input), now()) })
  })

  router.get('/files/leases', (ctx) => {
    const { state } = validate(FileLeaseList, ctx.query)
    reply(ctx, FileLeaseListAnswer, { file_leases: engine.listFileLeases(state === 'all' ? null : state).map((l) => fileLeaseView(l, now())) })
  })

  router.get('/blockers', (ctx) => {
    const { state } = validate(BlockerList, ctx.query)
    reply(ctx, BlockerListAnswer, { blockers: engine.listBlockers(state === 'all' ? null : state).map(blockerView) })
  })

  router.get('/blockers/:blocker_id', (ctx) => {
    reply(ctx, BlockerAnswer, { blocker: blockerView(engine.getBlocker(pathParam(ctx, 'blocker_id'))) })
  })

  router.post('/blockers/:blocker_id/resolve', async (ctx) => {
    const input = validate(BlockerResolve, await readJson(ctx, bodyLimit))
    const blocker = engine.resolveBlocker(pathParam(ctx, 'blocker_id'), input)
    const job = blocker.requester_job_id ? engine.getJob(blocker.requester_job_id) : null
    reply(ctx, BlockerResolved, { blocker: blockerView(blocker), job_state: job?.state ?? null })
  })

  return router
}
