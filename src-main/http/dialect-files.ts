import Router from '@koa/router'
import { z } from 'zod'
import type { BlockerRow, FileLeaseRow } from '../db/schema'
import type { ClockWaiters } from '../clock-waiters'
import type { Engine } from '../engine'
import { iso } from '../engine/clock'
import { RESOLUTIONS } from '../engine/blockers'
import type { Contention } from '../engine/files'
import { clientGone, readJson } from './body'
import { validate } from './errors'
import { Id, Note } from './schemas'

/** Seed 004 as CONTRACTS.md decides it: file leases and blocker halts. */
export const FilePath = z.string().min(1).max(4096)
export const OwnerId = z.string().min(1).max(200)

export const FileAcquire = z.strictObject({ file: FilePath, owner_id: OwnerId, lease_id: Id.nullable().optional() })
export type FileAcquire = z.infer<typeof FileAcquire>

export const FileHeartbeat = z.strictObject({ file: FilePath, owner_id: OwnerId })
export type FileHeartbeat = z.infer<typeof FileHeartbeat>

export const FileRelease = z.strictObject({ file: FilePath, owner_id: OwnerId })
export type FileRelease = z.infer<typeof FileRelease>

export const FileRetryWait = z.strictObject({ file: FilePath, owner_id: OwnerId, max_wait_ms: z.number().int().min(0).optional() })
export type FileRetryWait = z.infer<typeof FileRetryWait>

export const FileLeaseList = z.strictObject({ state: z.enum(['ACTIVE', 'RELEASED', 'REVOKED', 'all']).default('ACTIVE') })
export type FileLeaseList = z.infer<typeof FileLeaseList>

export const BlockerList = z.strictObject({ state: z.enum(['OPEN', 'RESOLVED', 'all']).default('all') })
export type BlockerList = z.infer<typeof BlockerList>

export const BlockerResolve = z.strictObject({ action: z.enum(RESOLUTIONS), note: Note.nullable().optional(), by: z.string().max(200).nullable().optional() })
export type BlockerResolve = z.infer<typeof BlockerResolve>

const ageS = (since: number, now: number) => Math.round((now - since) / 100) / 10

export function fileLeaseView(lease: FileLeaseRow, now: number) {
  return {
    file_lease_id: lease.id,
    file: lease.file,
    owner_id: lease.owner_id,
    lease_id: lease.lease_id,
    job_id: lease.job_id,
    state: lease.state,
    acquired_at: iso(lease.acquired_at),
    last_heartbeat_at: iso(lease.last_heartbeat_at),
    age_s: ageS(lease.acquired_at, now),
    released_at: iso(lease.released_at),
    release_reason: lease.release_reason,
  }
}

export function contentionView(c: Contention) {
  return { file: c.file, holder: { ...c.holder, acquired_at: iso(c.holder.acquired_at) }, denied_at: iso(c.denied_at), retry_at: iso(c.retry_at) }
}

/** The blocker report: the file, who holds it and for how long, the retry, who was halted. */
export function blockerView(b: BlockerRow) {
  return {
    blocker_id: b.id,
    file: b.file,
    holder: {
      owner_id: b.holder_owner_id,
      job_id: b.holder_job_id,
      acquired_at: iso(b.holder_acquired_at),
      last_heartbeat_at: iso(b.holder_last_heartbeat_at),
    },
    /** How long the holder had held the file when the retry was refused. */
    age_s: ageS(b.holder_acquired_at, b.retried_at),
    retry_s: b.retry_s,
    denied_at: iso(b.denied_at),
    retried_at: iso(b.retried_at),
    requester: { owner_id: b.requester_owner_id, job_id: b.requester_job_id, lease_id: b.requester_lease_id },
    state: b.state,
    resolution: b.resolution,
    note: b.note,
    resolved_by: b.resolved_by,
    resolved_at: iso(b.resolved_at),
    created_at: iso(b.created_at),
  }
}

/** The longest one wait for a retry may last; the worker asks again after it. */
const MAX_RETRY_WAIT_MS = 30_000

export function filesRouter(engine: Engine, clockWaiters: ClockWaiters, bodyLimit: number): Router {
  const router = new Router({ prefix: '/api' })
  const now = () => engine.ctx.clock.now()

  router.post('/files/leases/acquire', async (ctx) => {
    const input = validate(FileAcquire, await readJson(ctx, bodyLimit))
    const result = engine.acquireFile(input)
    if (result.granted) {
      ctx.body = { granted: true, file_lease: fileLeaseView(result.file_lease, now()) }
    } else if (result.code === 'file_lease_held') {
      ctx.status = 409
      ctx.body = { granted: false, code: 'file_lease_held', detail: `${result.contention.file} is held by ${result.contention.holder.owner_id}`, contention: contentionView(result.contention) }
    } else {
      ctx.status = 409
      ctx.body = { granted: false, code: 'blocked', detail: `Still blocked on ${result.blocker.file} after the retry: halted`, blocker: blockerView(result.blocker) }
    }
  })

  // Not in the seed: lets a denied requester wait for its one retry by the host's clock.
  router.post('/files/leases/wait', async (ctx) => {
    const input = validate(FileRetryWait, await readJson(ctx, bodyLimit))
    const retryAt = engine.fileRetryAt(input.file, input.owner_id)
    const ready = retryAt === null || (await clockWaiters.waitUntil(retryAt, Math.min(input.max_wait_ms ?? 0, MAX_RETRY_WAIT_MS), clientGone(ctx)))
    ctx.body = { ready, retry_at: iso(retryAt) }
  })

  router.post('/files/leases/heartbeat', async (ctx) => {
    const input = validate(FileHeartbeat, await readJson(ctx, bodyLimit))
    ctx.body = { ok: true, file_lease: fileLeaseView(engine.heartbeatFile(input), now()) }
  })

  router.post('/files/leases/release', async (ctx) => {
    const input = validate(FileRelease, await readJson(ctx, bodyLimit))
    ctx.body = { ok: true, file_lease: fileLeaseView(engine.releaseFile(input), now()) }
  })

  router.get('/files/leases', (ctx) => {
    const { state } = validate(FileLeaseList, ctx.query)
    ctx.body = { file_leases: engine.listFileLeases(state === 'all' ? null : state).map((l) => fileLeaseView(l, now())) }
  })

  router.get('/blockers', (ctx) => {
    const { state } = validate(BlockerList, ctx.query)
    ctx.body = { blockers: engine.listBlockers(state === 'all' ? null : state).map(blockerView) }
  })

  router.get('/blockers/:blocker_id', (ctx) => {
    ctx.body = { blocker: blockerView(engine.getBlocker(validate(Id, ctx.params.blocker_id))) }
  })

  router.post('/blockers/:blocker_id/resolve', async (ctx) => {
    const input = validate(BlockerResolve, await readJson(ctx, bodyLimit))
    const blocker = engine.resolveBlocker(validate(Id, ctx.params.blocker_id), input)
    const job = blocker.requester_job_id ? engine.getJob(blocker.requester_job_id) : null
    ctx.body = { blocker: blockerView(blocker), job_state: job?.state ?? null }
  })

  return router
}
