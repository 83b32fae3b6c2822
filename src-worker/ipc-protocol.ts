import { z } from 'zod'

/**
 * The one message registry between the host and its local worker processes, validated at both
 * ends. A worker calls the host (`request` → `response`, matched by id) with the same
 * semantics as dialect 003's /batch and /api/files over HTTP; the host tells a worker to drain.
 */

const Str = z.string().min(1).max(4096)
const JobRef = { job_id: Str, attempt_id: Str, lease_token: Str }
const Progress = { progress: z.number().min(0).max(1).nullable().optional(), note: z.string().max(10_000).nullable().optional() }
const AttemptFailure = z.object({ code: z.string(), message: z.string(), stack: z.string().optional(), retryable: z.boolean() })

export const IPC_METHODS = {
  /** Reports on the jobs a worker runs, then a claim for its free slots: one round trip (dialect 003's /batch). */
  exchange: z.object({
    worker_id: Str,
    heartbeat: z.array(z.object({ job_id: Str, lease_token: Str, ...Progress })).optional(),
    complete: z.array(z.object({ ...JobRef, result: z.unknown(), ...Progress })).optional(),
    fail: z.array(z.object({ ...JobRef, error: AttemptFailure })).optional(),
    claim: z
      .object({
        streams: z.array(Str).min(1),
        max_jobs: z.number().int().min(1).max(256),
        max_wait_ms: z.number().int().min(0),
        /** An idle handler thread with its own link: an answer granting one job goes there (thread-link.ts). */
        thread: z.number().int().min(0).max(255).optional(),
      })
      .optional(),
  }),
  acquireFile: z.object({ file: Str, owner_id: Str, lease_id: Str }),
  waitFileRetry: z.object({ file: Str, owner_id: Str, max_wait_ms: z.number().int().min(0) }),
  heartbeatFile: z.object({ file: Str, owner_id: Str }),
  report: z.object({ worker_id: Str, kind: Str, detail: z.string().max(10_000) }),
} as const

export type IpcMethod = keyof typeof IPC_METHODS
export type IpcParams<M extends IpcMethod> = z.infer<(typeof IPC_METHODS)[M]>

export const IpcRequest = z.object({
  type: z.literal('request'),
  id: z.number().int(),
  method: z.enum(Object.keys(IPC_METHODS) as [IpcMethod, ...IpcMethod[]]),
  params: z.unknown(),
})
export type IpcRequest = z.infer<typeof IpcRequest>

export const IpcError = z.object({ status: z.number().int(), code: z.string(), detail: z.string() })
export type IpcError = z.infer<typeof IpcError>

export const IpcResponse = z.object({
  type: z.literal('response'),
  id: z.number().int(),
  result: z.unknown().optional(),
  error: IpcError.optional(),
})
export type IpcResponse = z.infer<typeof IpcResponse>

/** Worker → host notices (no answer). */
export const WorkerNotice = z.discriminatedUnion('type', [
  z.object({ type: z.literal('ready'), worker_id: Str, types: z.array(z.string()) }),
])
export type WorkerNotice = z.infer<typeof WorkerNotice>

/** Host → worker commands. */
export const HostCommand = z.discriminatedUnion('type', [z.object({ type: z.literal('drain'), grace_ms: z.number().int().min(0) })])
export type HostCommand = z.infer<typeof HostCommand>

/** Everything a worker may send, for the host to validate in one step. */
export const FromWorker = z.union([IpcRequest, WorkerNotice])
export type FromWorker = z.infer<typeof FromWorker>

/** Everything the host may send. */
export const FromHost = z.union([IpcResponse, HostCommand])
export type FromHost = z.infer<typeof FromHost>
