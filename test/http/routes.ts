/**
 * Every route the HTTP app serves, read from its router (so a new route is covered by the
 * security tests without editing them), and the body schema of every POST/PUT/PATCH route
 * (exported by the API files) for the fuzz tests.
 */
import type { z } from 'zod'
import { BlockerResolve, FileAcquire, FileHeartbeat, FileRelease, FileRetryWait } from '../../src-main/http/files-api'
import { PullComplete, PullHeartbeat, PullLeaseRequest } from '../../src-main/http/pull-api'
import { CancelJob, ClaimJobs, LeaseHeartbeat, LeaseRelease, LeaseRequest, StatusUpdate, SubmitBatch, SubmitJob } from '../../src-main/http/queue-api'
import { WorkerClaim, WorkerComplete, WorkerExchange, WorkerFail, WorkerHeartbeat, WorkerReport } from '../../src-shared/worker-exchange'
import { ChangeSchedule, CreateSchedule } from '../../src-main/http/schedules'
import { createHttpApp, type HttpApp, type HttpDependencies } from '../../src-main/http/server'
import { CapacityChange } from '../../src-main/http/system'
import { BulkRequest, OperatorRequest } from '../../src-main/http/operations'

export interface Route {
  method: string
  /** With `:params`. */
  path: string
}

/**
 * The routes of the app exactly as createHttpApp mounts them, from its router's public `stack`.
 * Building the app touches none of its dependencies, so stubs do.
 */
export function allRoutes(): Route[] {
  const out: Route[] = []
  for (const layer of appWithStubs().router.stack) {
    for (const method of layer.methods) if (method !== 'HEAD') out.push({ method, path: layer.path as string })
  }
  return out
}

/** The HTTP app, built with stubs for its dependencies: building it touches none of them. */
export function appWithStubs(): HttpApp {
  const stub = null as never
  const deps = {
    engine: stub,
    dispatch: stub,
    clockWaiters: stub,
    version: '0.0.0',
    policy: { token: 'x'.repeat(32), port: 1, allowedHosts: [] },
    bodyLimitBytes: 1024,
    log: () => {},
  } as unknown as HttpDependencies
  return createHttpApp(deps)
}

/** A concrete path: every `:param` replaced by `id`. */
export const fill = (path: string, id: string) => path.replace(/:[a-z_]+/g, encodeURIComponent(id))

export interface BodyRoute extends Route {
  schema: z.ZodType
}

/** Every POST/PUT/PATCH route that reads a JSON body, with the schema it validates it against. */
export const BODY_ROUTES: BodyRoute[] = [
  { method: 'PUT', path: '/api/capacity', schema: CapacityChange },
  { method: 'POST', path: '/api/system/scheduler/leases/request', schema: PullLeaseRequest },
  { method: 'POST', path: '/api/system/scheduler/leases/:lease_id/heartbeat', schema: PullHeartbeat },
  { method: 'POST', path: '/api/system/scheduler/leases/:lease_id/complete', schema: PullComplete },
  { method: 'POST', path: '/api/scheduler/jobs/submit', schema: SubmitJob },
  { method: 'POST', path: '/api/scheduler/jobs/submit-batch', schema: SubmitBatch },
  { method: 'POST', path: '/api/scheduler/jobs/claim', schema: ClaimJobs },
  { method: 'POST', path: '/api/scheduler/jobs/:job_id/status', schema: StatusUpdate },
  { method: 'POST', path: '/api/scheduler/jobs/:job_id/cancel', schema: CancelJob },
  { method: 'POST', path: '/api/scheduler/lease/request', schema: LeaseRequest },
  { method: 'POST', path: '/api/scheduler/lease/:lease_id/heartbeat', schema: LeaseHeartbeat },
  { method: 'POST', path: '/api/scheduler/lease/:lease_id/release', schema: LeaseRelease },
  { method: 'POST', path: '/internal/worker/claim', schema: WorkerClaim },
  { method: 'POST', path: '/internal/worker/heartbeat', schema: WorkerHeartbeat },
  { method: 'POST', path: '/internal/worker/complete', schema: WorkerComplete },
  { method: 'POST', path: '/internal/worker/fail', schema: WorkerFail },
  { method: 'POST', path: '/internal/worker/report', schema: WorkerReport },
  { method: 'POST', path: '/internal/worker/batch', schema: WorkerExchange },
  { method: 'POST', path: '/api/files/leases/acquire', schema: FileAcquire },
  { method: 'POST', path: '/api/files/leases/wait', schema: FileRetryWait },
  { method: 'POST', path: '/api/files/leases/heartbeat', schema: FileHeartbeat },
  { method: 'POST', path: '/api/files/leases/release', schema: FileRelease },
  { method: 'POST', path: '/api/blockers/:blocker_id/resolve', schema: BlockerResolve },
  { method: 'POST', path: '/api/schedules', schema: CreateSchedule },
  { method: 'PATCH', path: '/api/schedules/:name', schema: ChangeSchedule },
  { method: 'POST', path: '/api/jobs/:job_id/retry', schema: OperatorRequest },
  { method: 'POST', path: '/api/jobs/:job_id/run-now', schema: OperatorRequest },
  { method: 'POST', path: '/api/jobs/bulk/retry', schema: BulkRequest },
  { method: 'POST', path: '/api/jobs/bulk/cancel', schema: BulkRequest },
  { method: 'POST', path: '/api/jobs/bulk/purge', schema: BulkRequest },
  { method: 'POST', path: '/api/queues/:queue/pause', schema: OperatorRequest },
  { method: 'POST', path: '/api/queues/:queue/resume', schema: OperatorRequest },
]

/** POST/PUT/PATCH routes that take no body at all (their body is never read). */
export const BODYLESS_WRITE_ROUTES: Route[] = [
  { method: 'POST', path: '/api/events/ticket' },
  { method: 'POST', path: '/api/storage/backup' },
]

/** The methods that write with a body. */
export const isWrite = (route: Route): boolean => route.method === 'POST' || route.method === 'PUT' || route.method === 'PATCH'
