import { z } from 'zod'
import { longPollMs } from '../dispatch/long-poll'
import { BLOCKER_STATES, FILE_LEASE_STATES, RESOLUTIONS } from '../engine'
import { iso } from '../engine/rules/clock'
import { type Api, NOT_FOUND, replyWith, route, type RouteCall, type RouteDeps } from './route'
import { Note, PageFields, pathParams, RequestedBy } from './schemas'
import { ErrorBody } from './views/errors'
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
  RetryTooEarly,
} from './views/files'
import { statusOf } from '../../src-shared/error-codes'
import { ABSOLUTE_PATH, FileAcquire, FileHeartbeat, FilePath, FileRelease, FileRetryWait, OwnerId } from '../../src-shared/worker-exchange'

// The files API (docs/file-leases.md): file leases and blocker halts.

// The gate's requests are the worker exchange's (src-shared/worker-exchange.ts): the local workers' IPC sends the same.
export { ABSOLUTE_PATH, FileAcquire, FileHeartbeat, FilePath, FileRelease, FileRetryWait, OwnerId }

export const FileLeaseList = z.strictObject({ state: z.enum([...FILE_LEASE_STATES, 'all']).default('ACTIVE'), ...PageFields })
export type FileLeaseList = z.infer<typeof FileLeaseList>

export const BlockerList = z.strictObject({ state: z.enum([...BLOCKER_STATES, 'all']).default('all'), ...PageFields })
export type BlockerList = z.infer<typeof BlockerList>

export const BlockerResolve = z.strictObject({ action: z.enum(RESOLUTIONS), note: Note.nullable().optional(), by: RequestedBy.describe('Who answers, recorded with the answer (operator when left out)') })
export type BlockerResolve = z.infer<typeof BlockerResolve>

const BlockerParams = pathParams('blocker_id')

/**
 * A caller with a worker token acts on file leases of its own jobs only: its acquire, heartbeat
 * or release must name its job's lease and that lease's token (engine proveJobLease). The host's
 * token acts on any file lease.
 */
function checkCaller(body: FileAcquire | FileHeartbeat | FileRelease, deps: RouteDeps, call: RouteCall<unknown>): void {
  if (deps.isWorkerCaller(call.header('authorization'))) deps.engine.proveJobLease(body)
}

/** The files API (/api/files, /api/blockers). */
export const filesApi: Api = {
  tag: 'files',
  description: 'The files API: file leases, and blocker reports an operator answers (/api/files, /api/blockers)',
  prefix: '/api',
  routes: [
    route({
      method: 'POST',
      path: '/files/leases/acquire',
      id: 'acquireFileLease',
      summary: 'Acquire a file (granted, held with one retry at +180 s, or halted)',
      body: FileAcquire,
      answer: FileLeaseGranted,
      errors: {
        400: 'invalid_request (a relative path, among others)',
        404: NOT_FOUND.lease,
        409: [
          'file_lease_held (with the contention), blocked (with the blocker report), lease_expired / lease_not_active for the lease named, file_lease_lost when an operator took a file from that lease (force_release), or lease_token_mismatch (a worker token whose lease_token is not that lease\'s)',
          z.union([FileAcquireRefusal, ErrorBody]),
        ],
        429: {
          description: 'retry_too_early: the one retry is at retry_at (no short-loop retries)',
          headers: z.object({ 'Retry-After': z.string().meta({ description: 'Seconds until the retry' }) }),
          content: { 'application/json': { schema: RetryTooEarly } },
        },
      },
      grouped: true,
      run: ({ body }, deps, call) => {
        const { engine } = deps
        checkCaller(body, deps, call)
        const result = engine.acquireFile(body)
        if (result.granted) return { granted: true as const, file_lease: fileLeaseView(result.file_lease, engine.now()) }
        return replyWith(FileAcquireRefusal, acquireRefusal(result), statusOf(result.code))
      },
    }),
    // Beyond its contract: lets a denied requester wait for its one retry by the host's clock.
    route({
      method: 'POST',
      path: '/files/leases/wait',
      id: 'waitFileRetry',
      summary: "Wait (by the host's clock, at most 30 s) until a denied requester's one retry is due",
      body: FileRetryWait,
      answer: FileRetryWaitAnswer,
      grouped: false,
      run: async ({ body }, { engine, clockWaiters }, call) => {
        const retryAt = engine.fileRetryAt(body.file, body.owner_id)
        const ready = retryAt === null || (await clockWaiters.waitUntil(retryAt, longPollMs(body.max_wait_ms), call.clientGone()))
        return { ready, retry_at: iso(retryAt) }
      },
    }),
    route({
      method: 'POST',
      path: '/files/leases/heartbeat',
      id: 'heartbeatFileLease',
      summary: 'Keep a held file lease from going idle (30 s)',
      body: FileHeartbeat,
      answer: FileLeaseAnswer,
      errors: { 404: 'file_lease_not_found, lease_not_found (a worker token naming no lease)', 409: 'file_lease_lost (taken by an operator), file_lease_not_held, lease_token_mismatch' },
      grouped: true,
      run: ({ body }, deps, call) => {
        checkCaller(body, deps, call)
        return { ok: true as const, file_lease: fileLeaseView(deps.engine.heartbeatFile(body), deps.engine.now()) }
      },
    }),
    route({
      method: 'POST',
      path: '/files/leases/release',
      id: 'releaseFileLease',
      summary: 'Release a file lease',
      body: FileRelease,
      answer: FileLeaseAnswer,
      errors: { 404: 'file_lease_not_found, lease_not_found (a worker token naming no lease)', 409: 'file_lease_lost, file_lease_not_held, lease_token_mismatch' },
      grouped: true,
      run: ({ body }, deps, call) => {
        checkCaller(body, deps, call)
        return { ok: true as const, file_lease: fileLeaseView(deps.engine.releaseFile(body), deps.engine.now()) }
      },
    }),
    route({
      method: 'GET',
      path: '/files/leases',
      id: 'listFileLeases',
      summary: 'File leases (ACTIVE by default), newest first, 500 a page unless `limit` says fewer',
      query: FileLeaseList,
      answer: FileLeaseListAnswer,
      grouped: false,
      run: ({ query }, { engine }) => {
        const page = engine.listFileLeases(query.state === 'all' ? null : query.state, query)
        return { file_leases: page.file_leases.map((l) => fileLeaseView(l, engine.now())), next_cursor: page.next_cursor }
      },
    }),
    route({
      method: 'GET',
      path: '/blockers',
      id: 'listBlockers',
      summary: 'Blocker reports, open first (oldest first), then resolved (the most recently answered first), 500 a page unless `limit` says fewer',
      query: BlockerList,
      answer: BlockerListAnswer,
      grouped: false,
      run: ({ query }, { engine }) => {
        const page = engine.listBlockers(query.state === 'all' ? null : query.state, query)
        return { blockers: page.blockers.map((b) => blockerView(b, engine.now())), next_cursor: page.next_cursor }
      },
    }),
    route({
      method: 'GET',
      path: '/blockers/:blocker_id',
      id: 'getBlocker',
      summary: 'One blocker report',
      params: BlockerParams,
      answer: BlockerAnswer,
      errors: { 404: NOT_FOUND.blocker },
      grouped: false,
      run: ({ params }, { engine }) => ({ blocker: blockerView(engine.getBlocker(params.blocker_id), engine.now()) }),
    }),
    route({
      method: 'POST',
      path: '/blockers/:blocker_id/resolve',
      id: 'resolveBlocker',
      summary: "The operator's answer: retry, force_release or cancel",
      params: BlockerParams,
      body: BlockerResolve,
      answer: BlockerResolved,
      errors: { 404: NOT_FOUND.blocker, 409: 'blocker_resolved (answered already), illegal_transition' },
      grouped: true,
      run: ({ body, params }, { engine }) => {
        const { blocker, taken_from_holder } = engine.resolveBlocker(params.blocker_id, body)
        const job = blocker.requester_job_id ? engine.getJob(blocker.requester_job_id) : null
        return { blocker: blockerView(blocker, engine.now()), job_state: job?.state ?? null, taken_from_holder }
      },
    }),
  ],
}
