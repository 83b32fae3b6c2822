/**
 * The limits of what one request may carry and how long one may wait, shared by the host, the
 * workers and the command line. Plain numbers, apart from the schemas of worker-exchange.ts
 * (which re-exports them), so that a client command loads no zod for them.
 */

/**
 * The largest request body a host can be set to take (`serve --body-limit`, 1 MiB by default): a
 * result or an error larger than this can reach no host, so `leasehold worker`, which does not
 * know its host's limit, fails it at once (src-worker/handler-output.ts).
 */
export const MAX_BODY_LIMIT_BYTES = 64 * 1024 * 1024
/**
 * The room a result or an error leaves in a request for the exchange around it: the worker's
 * and the job's ids, the job's last progress note, the worker's claim, the other jobs'
 * heartbeats. A result is held to the body limit less this on every kind of worker
 * (src-worker/handler-output.ts): a local worker's exchange goes over IPC, where no body limit
 * holds, and one held to the whole limit was taken there and refused (413) over HTTP or Redis.
 */
export const REPORT_ENVELOPE_BYTES = 16 * 1024

/** The most items one batch may carry (reports of an exchange, jobs of a batch submit). */
export const MAX_BATCH_ITEMS = 1000
/** The most jobs one claim may take. */
export const MAX_CLAIM_JOBS = 256
/** The shortest API token a host takes (`--token`, or its data dir's token file). */
export const MIN_TOKEN_CHARS = 16
/** What a token may hold: visible ASCII, as an `Authorization: Bearer` header carries it (no spaces, no control characters). */
export const TOKEN_CHARS = /^[\x21-\x7e]+$/
export const TOKEN_CHARS_RULE = 'must be visible ASCII characters only (no spaces or control characters): it is sent in an Authorization header'
/** The longest id, token, worker id or stream name. */
export const MAX_ID_CHARS = 200
/** The longest error message or stack a failure report carries. */
export const MAX_ERROR_CHARS = 100_000
/** The longest progress note a heartbeat or completion carries. */
export const MAX_NOTE_CHARS = 10_000
/** The most streams one claim may name. */
export const MAX_STREAMS = 50
/** The most job types one claim may name (the handlers of its worker). */
export const MAX_JOB_TYPES = 1000

/**
 * Jobs a worker runs at once unless configured (`leasehold worker --concurrency`), and the
 * fewest a local worker of the host runs (`leasehold serve --worker-concurrency`). Jobs mostly
 * wait (on files, programs, the network), and while one waits another runs; the capacity units,
 * not this number, keep the machine from being overrun. 32 rather than 16: a worker then claims
 * and reports in batches twice as large, and the pool drained 5-20 % faster, with a quarter less
 * of the workers' CPU per job (docs/performance.md).
 */
export const DEFAULT_WORKER_CONCURRENCY = 32

/** The most jobs one worker may run at once (and so claim in one request). */
export const MAX_WORKER_CONCURRENCY = 256

/**
 * The longest a long-poll waits in one request — a worker's claim, a file lease's retry wait —
 * whatever transport asked. A larger wait is accepted and waits this long (the worker asks again).
 */
export const MAX_LONG_POLL_MS = 30_000
/** The largest `max_wait_ms` a request may name (an hour); above it is 400. */
export const MAX_WAIT_MS_ACCEPTED = 3_600_000

/**
 * How long a local worker told to drain may live past its grace before its host's pool kills it
 * (src-main/pool/supervisor.ts). The worker reports the jobs it stopped at the grace's end well
 * within it (src-worker/runtime.ts, SHUTDOWN_ABORT_GRACE_MS).
 */
export const DRAIN_KILL_AFTER_MS = 5_000

/**
 * How long a worker's handler modules may take to load, all of them at once (src-worker/handlers):
 * a module whose evaluation has not finished by then (a top-level `await` that never settles) is
 * a handler that did not load. Unbounded, such a module held its thread's start for ever; or,
 * with nothing else to keep the thread alive, Node ended the thread (exit code 13), and the
 * worker with it.
 */
export const HANDLER_LOAD_TIMEOUT_MS = 5_000
