import { z } from 'zod'
import { MAX_JSON_DEPTH } from './json-faults'
import { DOT_SEGMENT_REFUSAL, isDotSegment } from './queue-name'
import { actorNameFault } from './worker-id'
import { MAX_BATCH_ITEMS, MAX_CLAIM_JOBS, MAX_ERROR_CHARS, MAX_ID_CHARS, MAX_JOB_TYPES, MAX_LONG_POLL_MS, MAX_NOTE_CHARS, MAX_STREAMS, MAX_WAIT_MS_ACCEPTED } from './limits'

/**
 * The worker exchange: what a worker sends the host and what it gets back, whatever carries it —
 * the worker API over HTTP (`/internal/worker/claim`, `heartbeat`, `complete`, `fail`, `batch`,
 * `report`) and the local workers' IPC (`exchange`, `report`). One schema and one set of limits
 * for every transport: the host validates with it, the worker runtime is typed by it, and the
 * OpenAPI document describes it.
 */

export * from './limits'

// ---------------------------------------------------------------------------------------------
// Fields

/** An identifier in a path or body (job, lease, attempt ids are UUIDs, but unknown ids are 404, not 400). */
export const Id = z.string().min(1).max(MAX_ID_CHARS)
/**
 * A name for who acts — a worker, or whoever asks for an operator's action: shown in the logs,
 * `leasehold status`, the dashboard and the timeline, so not blank, without whitespace around it
 * and without control or invisible characters (U+0000 among them, which cuts it short there):
 * worker-id.ts.
 */
export const ActorName = z
  .string()
  .min(1)
  .max(MAX_ID_CHARS)
  // A refine (not a superRefine), which src-shared/fast-parse.ts compiles: the id is in every exchange.
  .refine((id) => actorNameFault(id) === null, { error: (issue) => actorNameFault(issue.input as string) ?? 'is not a name' })
/** A worker's id: an {@link ActorName}. */
export const WorkerId = ActorName
/** The secret that names a lease in a worker's reports. */
export const LeaseToken = z.string().min(1).max(MAX_ID_CHARS)
export const Progress = z.number().min(0).max(1)
export const Note = z.string().max(MAX_NOTE_CHARS)
/** Any JSON value; bounded by the body limit. */
export const JsonValue: z.ZodType<unknown> = z.unknown()
export const MaxWaitMs = z
  .number()
  .int()
  .min(0)
  .max(MAX_WAIT_MS_ACCEPTED)
  .meta({ description: `How long to wait for an answer, in ms; the host waits at most ${MAX_LONG_POLL_MS} ms (a larger value is capped)` })
/** A time as the API writes it: ISO-8601 UTC with milliseconds. */
export const IsoTime = z.iso.datetime().meta({ id: 'Timestamp', description: 'ISO-8601 UTC with milliseconds, e.g. 2026-02-06T20:15:30.123Z' })

/** U+0000, or a surrogate not in a pair (`u` makes a pair one code point, outside the class). */
const ILL_FORMED = /[\u0000\ud800-\udfff]/u

/**
 * A name the host keeps and shows: a job type, a queue (a worker's stream). Well-formed Unicode
 * without U+0000: JSON can spell a lone surrogate (`"\ud800"`), which has no UTF-8 form, so the
 * name would come back altered from the database, the logs and every client; and a NUL cuts the
 * name short wherever it meets a C string (a terminal, a log line, SQLite's text functions).
 * Schedule names are narrower still (src-main/http/schedules.ts).
 */
export const Name = z
  .string()
  .min(1)
  .max(MAX_ID_CHARS)
  .refine((name) => !ILL_FORMED.test(name), 'must be well-formed Unicode without U+0000 (no lone surrogates)')

/** A queue (a worker's stream): a Name that is not "." or ".." (queue-name.ts says why). */
export const QueueName = Name.refine((name) => !isDotSegment(name), DOT_SEGMENT_REFUSAL)

/** The streams (job queues) a claim takes from, in the order tried. */
const Streams = z.array(QueueName).min(1).max(MAX_STREAMS)

/**
 * The job types a claim takes (a worker sends those it has handlers for): jobs of other types
 * are left to other workers, never granted to this one only to fail. Absent: every type.
 */
const JobTypes = z
  .array(Name)
  .min(1)
  .max(MAX_JOB_TYPES)
  .meta({ description: 'Only jobs of these types are granted (the types the worker runs); absent, any type' })

/**
 * Whether the worker has a GPU: a job submitted with `constraints.gpu_required` is granted only
 * to a claim that says so, and skipped by every other. Absent: it has none.
 */
export const GpuAvailable = z.boolean().meta({ description: 'The worker has a GPU: jobs with constraints.gpu_required are granted to it; absent or false, they are skipped' })

// ---------------------------------------------------------------------------------------------
// Requests

export const WorkerClaim = z.strictObject({
  worker_id: WorkerId,
  streams: Streams,
  job_types: JobTypes.optional(),
  gpu_available: GpuAvailable.optional(),
  max_wait_ms: MaxWaitMs.optional(),
})
export type WorkerClaim = z.infer<typeof WorkerClaim>

const HeartbeatFields = { job_id: Id, lease_token: LeaseToken, progress: Progress.nullable().optional(), note: Note.nullable().optional() }

export const WorkerHeartbeat = z.strictObject({ worker_id: WorkerId, ...HeartbeatFields })
export type WorkerHeartbeat = z.infer<typeof WorkerHeartbeat>

/** The attempt a completion or failure is about, and the stream message it came as (the worker contract sends them back). */
const AttemptFields = {
  job_id: Id,
  attempt_id: Id,
  lease_token: LeaseToken,
  stream: z.string().max(MAX_ID_CHARS).optional(),
  message_id: z.string().max(MAX_ID_CHARS).optional(),
}

/** How an attempt failed, as the worker reports it (failures are data: each attempt keeps its error). */
export const AttemptFailure = z.strictObject({
  code: z.string().max(MAX_ID_CHARS).optional(),
  message: z.string().max(MAX_ERROR_CHARS).optional(),
  stack: z.string().max(MAX_ERROR_CHARS).optional(),
  retryable: z.boolean().optional(),
})
export type AttemptFailure = z.infer<typeof AttemptFailure>

export const WorkerComplete = z.strictObject({ worker_id: WorkerId, ...AttemptFields, result: JsonValue.optional() })
export type WorkerComplete = z.infer<typeof WorkerComplete>

export const WorkerFail = z.strictObject({ worker_id: WorkerId, ...AttemptFields, error: AttemptFailure })
export type WorkerFail = z.infer<typeof WorkerFail>

const Reports = <T extends z.ZodType>(item: T) => z.array(item).max(MAX_BATCH_ITEMS).optional()

/** A claim for a worker's free slots: up to `max_jobs`, waiting up to `max_wait_ms` if none can be leased now (not beside heartbeats: src-main/dispatch/dispatch.ts `exchange`). */
export const ExchangeClaim = z.strictObject({
  streams: Streams,
  job_types: JobTypes.optional(),
  gpu_available: GpuAvailable.optional(),
  max_jobs: z.number().int().min(1).max(MAX_CLAIM_JOBS),
  max_wait_ms: MaxWaitMs.meta({
    description: `How long the claim waits for work when none can be leased now, in ms; the host waits at most ${MAX_LONG_POLL_MS} ms (a larger value is capped). An exchange that carries heartbeats, or whose report the host refuses, is answered at once: its claim takes what is queued and does not wait`,
  }).optional(),
})

/**
 * How deep a handler's result may nest: an exchange carries it three levels in (the body, its
 * `complete` list, the report), and the host refuses a body nested deeper than MAX_JSON_DEPTH
 * on every transport. The worker fails a deeper result where its handler ran
 * (src-worker/handler-output.ts), as a result JSON cannot carry.
 */
export const MAX_RESULT_DEPTH = MAX_JSON_DEPTH - 3

/**
 * A worker's whole round trip in one message — heartbeats, completions and failures of the jobs
 * it runs, then a claim for its free slots. A completion may carry the job's last progress and
 * note, instead of a heartbeat before it.
 */
export const WorkerExchange = z.strictObject({
  worker_id: WorkerId,
  heartbeat: Reports(z.strictObject(HeartbeatFields)),
  complete: Reports(z.strictObject({ ...AttemptFields, result: JsonValue.optional(), progress: Progress.nullable().optional(), note: Note.nullable().optional() })),
  fail: Reports(z.strictObject({ ...AttemptFields, error: AttemptFailure })),
  claim: ExchangeClaim.optional(),
})
export type WorkerExchange = z.infer<typeof WorkerExchange>

/** The lists of reports an exchange carries, each answered report by report. */
export const REPORT_LISTS = ['heartbeat', 'complete', 'fail'] as const

/**
 * An exchange as a whole, its reports unread: what must hold for the host to take any of it (an
 * object, its worker, its claim, lists of at most MAX_BATCH_ITEMS). A report that fails its own
 * schema is refused alone, in its slot of the answer (src-main/http/exchange-body.ts).
 */
export const ExchangeEnvelope = WorkerExchange.extend({
  heartbeat: Reports(z.unknown()),
  complete: Reports(z.unknown()),
  fail: Reports(z.unknown()),
})

/**
 * Leases a worker gives back unheard: granted in the answer to a claim it had given up on (the
 * answer came after the worker stopped waiting for it). Their jobs go back to the queue at once
 * and lose no attempt; a lease heartbeated since its grant is not given back this way.
 */
export const HandBack = z.strictObject({ worker_id: WorkerId, lease_ids: z.array(Id).min(1).max(256) })
export type HandBack = z.infer<typeof HandBack>

/** The leases an exchange's answer grants (its `jobs`), or a one-job claim's answer (its `lease_id`). */
export function grantedLeaseIds(result: unknown): string[] {
  const answer = result as { jobs?: { lease_id?: unknown }[]; lease_id?: unknown } | null | undefined
  const jobs = answer?.jobs ?? (answer?.lease_id ? [answer] : [])
  return jobs.map((job) => job.lease_id).filter((id): id is string => typeof id === 'string')
}

/** Something an operator should see (a handler module that failed to load). */
export const WorkerReport = z.strictObject({ worker_id: WorkerId, kind: z.string().min(1).max(100), detail: z.string().max(10_000) })
export type WorkerReport = z.infer<typeof WorkerReport>

// ---------------------------------------------------------------------------------------------
// The file gate: a handler's writes pass it (the files API over HTTP, the same messages over IPC)

/**
 * A file's absolute path: POSIX (`/…`) or Windows (`C:\…`, `\\server\share\…`), each keyed by its
 * own rules whatever the host's platform (src-main/engine/rules/file-keys.ts), which also refuse a
 * Windows path with neither drive nor share (`\x`), and one with a NUL.
 */
export const ABSOLUTE_PATH = /^(\/|\\|[A-Za-z]:[\\/])/
/** The longest path the file gate keys (Linux's PATH_MAX): a worker refuses a longer one itself, at once (src-worker/gate-path.ts). */
export const MAX_PATH_CHARS = 4096
export const FilePath = z.string().max(MAX_PATH_CHARS).regex(ABSOLUTE_PATH, 'must be an absolute path')
/** Who holds a file: shown in blocker reports, the command line and the dashboard, so a name as any other ({@link Name}). */
export const OwnerId = Name

/**
 * The job lease a file request acts under, and that lease's token (beyond the files contract). A
 * caller with a worker token acts only on file leases of its own jobs, so it must send both: the
 * token, which only the worker the job was granted to has, proves the lease is its own.
 */
const UnderJobLease = {
  lease_id: Id.nullable().optional(),
  lease_token: LeaseToken.nullable().optional().meta({ description: "The job lease's token: required with a worker token, which acts only under its own jobs' leases" }),
}

export const FileAcquire = z.strictObject({ file: FilePath, owner_id: OwnerId, ...UnderJobLease })
export type FileAcquire = z.infer<typeof FileAcquire>

/**
 * A heartbeat or release may name the job lease its file lease was acquired under (beyond the
 * files contract): the owner id of a job's every attempt is often the same (`job:<id>`), and only
 * the job lease keeps a stale attempt's release off the file lease its next attempt holds.
 */
export const FileHeartbeat = z.strictObject({ file: FilePath, owner_id: OwnerId, ...UnderJobLease })
export type FileHeartbeat = z.infer<typeof FileHeartbeat>

export const FileRelease = z.strictObject({ file: FilePath, owner_id: OwnerId, ...UnderJobLease })
export type FileRelease = z.infer<typeof FileRelease>

export const FileRetryWait = z.strictObject({ file: FilePath, owner_id: OwnerId, max_wait_ms: MaxWaitMs.optional() })
export type FileRetryWait = z.infer<typeof FileRetryWait>

// ---------------------------------------------------------------------------------------------
// Answers

/** the worker contract's claim answer, plus the job's type, its lease id and its max runtime. */
export const WorkerClaimed = z
  .object({
    claimed: z.literal(true),
    job_id: z.string(),
    attempt_id: z.string(),
    lease_id: z.string(),
    lease_token: z.string().meta({ description: 'Secret: names the lease in heartbeat, complete and fail' }),
    stream: z.string().meta({ description: "The job's queue" }),
    message_id: z.string().nullable(),
    payload: z.unknown(),
    job_type: z.string(),
    max_runtime_s: z.number().int().nullable(),
    lease_ttl_seconds: z.number().int(),
    heartbeat_interval_seconds: z.number().int(),
  })
  .meta({ id: 'WorkerClaimed', description: 'A claimed job: lease + attempt + token' })
export type WorkerClaimed = z.infer<typeof WorkerClaimed>

export const WorkerClaimAnswer = z
  .union([WorkerClaimed, z.object({ claimed: z.literal(false) })])
  .meta({ id: 'WorkerClaimAnswer', description: 'A claimed job, or {claimed: false} when none came within max_wait_ms' })
export type WorkerClaimAnswer = z.infer<typeof WorkerClaimAnswer>

export const WorkerHeartbeatAnswer = z
  .object({ ok: z.literal(true), lease_expires_at: IsoTime, cancel_requested: z.boolean().meta({ description: 'Stop the job: it was canceled' }) })
  .meta({ id: 'WorkerHeartbeatAnswer' })
export type WorkerHeartbeatAnswer = z.infer<typeof WorkerHeartbeatAnswer>

export const WorkerCompleteAnswer = z
  .object({ ok: z.literal(true), ack: z.boolean().meta({ description: 'The stream message may be acknowledged' }) })
  .meta({ id: 'WorkerCompleteAnswer' })
export type WorkerCompleteAnswer = z.infer<typeof WorkerCompleteAnswer>

export const WorkerFailAnswer = z
  .object({
    ok: z.literal(true),
    ack: z.boolean(),
    requeued: z.boolean().meta({ description: 'Retryable with attempts left: queued again after a backoff' }),
    dlq: z.boolean().meta({ description: 'Dead-lettered: a retryable failure with no attempts left. A failure that is not retryable is final (FAILED), not dead-lettered' }),
  })
  .meta({ id: 'WorkerFailAnswer' })
export type WorkerFailAnswer = z.infer<typeof WorkerFailAnswer>

export const WorkerReportAnswer = z.object({ ok: z.literal(true) }).meta({ id: 'WorkerReportAnswer' })

/**
 * A refused item of a batch: the one-job route's refusal (`ok: false`, `ack` on complete/fail) with
 * the job's id — its 409 body, or the 400 `invalid_request` of a report that failed its own schema
 * (its `job_id` as sent, "" when it named none: src-main/http/exchange-body.ts).
 */
export const RefusedItem = z.object({ job_id: z.string(), ok: z.literal(false), code: z.string(), detail: z.string() })
export type RefusedItem = z.infer<typeof RefusedItem>
export const RefusedReport = RefusedItem.extend({ ack: z.boolean() })
export type RefusedReport = z.infer<typeof RefusedReport>

export const WorkerExchangeAnswer = z
  .object({
    heartbeats: z.array(z.union([WorkerHeartbeatAnswer.extend({ job_id: z.string() }), RefusedItem])),
    completed: z.array(z.union([WorkerCompleteAnswer.extend({ job_id: z.string() }), RefusedReport])),
    failed: z.array(z.union([WorkerFailAnswer.extend({ job_id: z.string() }), RefusedReport])),
    jobs: z.array(WorkerClaimed).meta({ description: 'The jobs claimed for the free slots' }),
    claim_waited_ms: z.number().min(0).meta({
      description:
        'How long the claim waited at the host for its jobs, in milliseconds: 0 when they were queued as it came, or when it claimed nothing. A worker paces its next claim by it while jobs stream in one at a time',
    }),
  })
  .meta({ id: 'WorkerBatchAnswer', description: 'One entry per report, in the order sent, each as its one-job route answers it; then the claims' })
export type WorkerExchangeAnswer = z.infer<typeof WorkerExchangeAnswer>

/** A 409 of a heartbeat: the lease is gone, `ok: false` beside `{detail, code}`. */
export const WorkerRefusal = z
  .object({ ok: z.literal(false), detail: z.string(), code: z.string().meta({ description: 'lease_token_mismatch, lease_expired, lease_not_active, …' }) })
  .meta({ id: 'WorkerRefusal' })
export type WorkerRefusal = z.infer<typeof WorkerRefusal>

/** A 409 of a completion or failure: whether the stream message may be acknowledged all the same. */
export const WorkerReportRefusal = WorkerRefusal.extend({
  ack: z.boolean().meta({ description: 'true: the attempt had already ended (requeued or dead-lettered); acknowledge the message' }),
}).meta({ id: 'WorkerReportRefusal' })
export type WorkerReportRefusal = z.infer<typeof WorkerReportRefusal>
