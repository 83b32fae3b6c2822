import { z } from 'zod'
import { FileAcquire, FileHeartbeat, FileRetryWait, HandBack, Id, WorkerExchange, WorkerReport } from './worker-exchange'

/**
 * The one message registry between the host and its local worker processes, validated at both
 * ends. A worker calls the host (`request` → `response`, matched by id) with the same messages
 * and semantics as the worker API's /batch and the files API over HTTP (worker-exchange.ts);
 * the host tells a worker to drain.
 */

export const IPC_METHODS = {
  /** Reports on the jobs a worker runs, then a claim for its free slots: one round trip (the worker API's /batch). */
  exchange: WorkerExchange,
  acquireFile: FileAcquire,
  waitFileRetry: FileRetryWait,
  heartbeatFile: FileHeartbeat,
  report: WorkerReport,
  /** Leases granted in an answer that came after the worker stopped waiting for it, given back unheard. */
  handBack: HandBack,
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

/**
 * An `exec` program's process group, started or ended in a local worker: the host ends the groups
 * a worker that exits leaves running (src-worker/exec-groups.ts). `started` is when the group's
 * leader started (src-shared/process-groups.ts), by which a later process given its pid is told apart.
 */
export const ExecGroupNotice = z.discriminatedUnion('type', [
  z.object({ type: z.literal('exec_started'), pgid: z.number().int().min(2), started: z.string().max(40) }),
  z.object({ type: z.literal('exec_ended'), pgid: z.number().int().min(2) }),
])
export type ExecGroupNotice = z.infer<typeof ExecGroupNotice>

/** Worker → host notices (no answer). */
export const WorkerNotice = z.discriminatedUnion('type', [
  z.object({ type: z.literal('ready'), worker_id: Id, types: z.array(z.string()) }),
  ...ExecGroupNotice.options,
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
