import { type JobRow, type LeaseRow, UNKEYED_ID_CLAUSE } from '../../db/schema'
import type { StoreContext } from './context'
import { EngineError, type ErrorExtra, jobNotFound, leaseNotFound } from '../rules/errors'
import type { EventData, EventEntity, EventType } from '../rules/events'
import { idKey, idKeySql } from './ids'
import { assertMove, type AttemptDisposition, type FinalStatus, type JobState } from '../rules/states'

/**
 * The row layer of jobs and leases: reading them, and writing them as the verbs decide, with
 * the memory of ACTIVE leases kept in step (see active-leases.ts). It holds no rule but the
 * transition table, and imports no verb module: the verbs (grants.ts, lease-lookup.ts,
 * heartbeats.ts, lease-end.ts, attempt-reports.ts, jobs.ts, files.ts, blockers.ts) build on it.
 */

/** The job's progress and note, as a heartbeat reports them (or a completion, for the last). */
export interface HeartbeatReport {
  progress?: number | null
  note?: string | null
}

/** A lease and its job, as a verb answers them. */
export interface Leased {
  lease: LeaseRow
  job: JobRow
}

/**
 * The job or lease with this id, or undefined. Its id names its key (ids.ts `keyedId`: a job's
 * `seq`, a lease's `fence`): one read by the table's key, and the id checked. A row made before
 * ids named their key is found through its table's partial index on ids (UNKEYED_ID_CLAUSE).
 * `select` is the read's start: `SELECT … FROM` the table.
 */
function rowById<Row extends { id: string }>(ctx: StoreContext, select: string, key: 'seq' | 'fence', id: string): Row | undefined {
  const value = idKey(id)
  if (value === null) return ctx.one<Row>(`${select} WHERE id = ? AND ${UNKEYED_ID_CLAUSE}`, id)
  const row = ctx.one<Row>(`${select} WHERE ${key} = ?`, value)
  return row?.id === id ? row : undefined
}

/** The job with this id, or undefined (see rowById). */
export const findJob = (ctx: StoreContext, jobId: string): JobRow | undefined => rowById<JobRow>(ctx, SELECT_JOBS, 'seq', jobId)

/**
 * SQL: whether the job whose id `column` holds exists, found as {@link findJob} finds it: by the
 * key its id names, or through the partial index for an older unkeyed id. One indexed read a row,
 * where `jobs.id = column` alone reads all of jobs (there is no full index on ids).
 */
export function jobExistsSql(column: string): string {
  return `CASE WHEN substr(${column}, 15, 1) = '8'
    THEN EXISTS (SELECT 1 FROM jobs WHERE jobs.seq = ${idKeySql(column)} AND jobs.id = ${column})
    ELSE EXISTS (SELECT 1 FROM jobs WHERE jobs.id = ${column} AND ${UNKEYED_ID_CLAUSE}) END`
}

export function getJob(ctx: StoreContext, jobId: string): JobRow {
  const job = findJob(ctx, jobId)
  if (!job) throw jobNotFound(jobId)
  return job
}

/**
 * An event of a job's timeline, as the verb that records it gives it: its type and data, and the
 * lease, file lease, blocker or schedule it is about when that is not the job itself.
 */
export type JobEvent = {
  [T in EventType]: EventEntity<T> extends 'JOB'
    ? { type: T; data: EventData<T> }
    : { type: T; data: EventData<T>; entity: EventEntity<T>; entityId: string }
}[EventType]

/** Appends the job's events, in order, each chained to the one before; returns the last one's id. */
function appendJobEvents(ctx: StoreContext, job: JobRow, events: readonly JobEvent[]): number {
  let id = 0
  for (const event of events) {
    id = 'entity' in event
      ? ctx.appendJobEvent(job, event.entity, event.entityId, event.type, event.data)
      : ctx.appendJobEvent(job, 'JOB', job.id, event.type, event.data)
  }
  return id
}

/** Every column of a job. */
const JOB_COLUMNS = [
  'seq', 'id', 'addon_id', 'job_type', 'priority', 'cost_units', 'constraints', 'payload', 'is_unique', 'idempotency_key', 'tags',
  'max_runtime_s', 'queue', 'max_attempts', 'attempt_budget', 'state', 'attempts', 'claimed_by', 'claim_expires_at',
  'lease_id', 'stream_message_id', 'next_retry_at', 'eligible_at', 'run_at', 'cancel_requested', 'progress', 'note',
  'dead_letter', 'final_status', 'error', 'result', 'metrics', 'created_at', 'updated_at', 'started_at', 'finished_at', 'last_event_id',
] as const satisfies readonly (keyof JobRow)[]
/** Fails to compile while a column of the table is missing from the list. */
const allJobColumns: Exclude<keyof JobRow, (typeof JOB_COLUMNS)[number]> extends never ? true : never = true
void allJobColumns

/**
 * The start of every read of whole job rows: their columns in the order of {@link JOB_COLUMNS},
 * not `SELECT *`. The table's own order is not that one (a migration adds its column at the
 * table's end), and V8 gives an object built with its properties in another order another shape
 * (map). Read in this order, a row has the shape of the rows the engine writes ({@link copyJob}),
 * so the verbs see one shape, whether a job's row was kept in memory since its write or read
 * back (queued-rows.ts, pick.ts). With two, the first row read back made a drain's hot verbs
 * deoptimize, and they ran on both shapes after (docs/performance.md).
 */
export const SELECT_JOBS = `SELECT ${JOB_COLUMNS.join(', ')} FROM jobs`

/**
 * A copy of a job row, every column written out. Each write's new row is made here, so the rows
 * the engine keeps and passes between its verbs share one shape (V8's map; the submit's
 * literal, with the columns in the same order, shares it too), and V8 reads and copies them on
 * its fast paths. A spread's copy had a shape of its own for each shape it copied — the
 * submit's, each statement's row builder's, the spreads' own — and each copy took V8's slow clone.
 */
export function copyJob(job: JobRow): JobRow {
  return {
    seq: job.seq,
    id: job.id,
    addon_id: job.addon_id,
    job_type: job.job_type,
    priority: job.priority,
    cost_units: job.cost_units,
    constraints: job.constraints,
    payload: job.payload,
    is_unique: job.is_unique,
    idempotency_key: job.idempotency_key,
    tags: job.tags,
    max_runtime_s: job.max_runtime_s,
    queue: job.queue,
    max_attempts: job.max_attempts,
    attempt_budget: job.attempt_budget,
    state: job.state,
    attempts: job.attempts,
    claimed_by: job.claimed_by,
    claim_expires_at: job.claim_expires_at,
    lease_id: job.lease_id,
    stream_message_id: job.stream_message_id,
    next_retry_at: job.next_retry_at,
    eligible_at: job.eligible_at,
    run_at: job.run_at,
    cancel_requested: job.cancel_requested,
    progress: job.progress,
    note: job.note,
    dead_letter: job.dead_letter,
    final_status: job.final_status,
    error: job.error,
    result: job.result,
    metrics: job.metrics,
    created_at: job.created_at,
    updated_at: job.updated_at,
    started_at: job.started_at,
    finished_at: job.finished_at,
    last_event_id: job.last_event_id,
  }
}

/** Writes a new job (inside the submit's transaction). */
export function insertJob(ctx: StoreContext, job: JobRow): void {
  ctx.insert('jobs', JOB_COLUMNS, job)
  ctx.rowWrites.jobInserted(job)
}

/**
 * Writes a new job already moved on to `to`: the row {@link insertJob} and then {@link moveJob}
 * would leave, in one write. `job` is the row as submitted, not written yet, whose submit event
 * is appended; `events` follow it in the job's chain. Returns the row as written.
 */
export function insertMovedJob(ctx: StoreContext, job: JobRow, to: JobState, changes: Partial<JobRow>, ...events: JobEvent[]): JobRow {
  assertMove(job.id, job.state, to)
  const moved = copyJob(job)
  for (const column of Object.keys(changes) as (keyof JobRow)[]) (moved as Record<keyof JobRow, unknown>)[column] = changes[column]
  moved.state = to
  moved.last_event_id = events.length > 0 ? appendJobEvents(ctx, job, events) : job.last_event_id
  moved.updated_at = ctx.clock.now()
  insertJob(ctx, moved)
  return moved
}

/** Each column's digit (1–37) in the key of an UPDATE's written columns, in the order written. */
const JOB_COLUMN_DIGIT = new Map<string, number>(JOB_COLUMNS.map((column, i) => [column, i + 1]))
/** Up to ten digits of base 38 make a key below 2^53, exact in a double. */
const MAX_KEYED_COLUMNS = 10
/**
 * The `UPDATE jobs` for each list of columns written, by its key: made once. Building the text
 * and hashing it for the statement cache on every write cost more than the rest of the write's JS.
 */
const jobUpdates = new Map<number, string>()

/**
 * Writes the job's changed columns, bumps `updated_at`, and returns the row as it now is; the
 * `events` that record the change are appended first and the last becomes the job's
 * `last_event_id` in the same write (a job's events are a chain: no index holds them). Only the
 * columns whose value changes are written: SQLite maintains every index that names a column an
 * UPDATE writes, even to write the value it had (jobs_claim_expiry names a claim's expiry, which
 * most moves set to the null it already is).
 */
export function updateJob(ctx: StoreContext, job: JobRow, changes: Partial<JobRow>, ...events: JobEvent[]): JobRow {
  return writeJob(ctx, job, changes, undefined, events)
}

/**
 * Moves a job to a new state through the transition table, with any other changes and the events
 * that record the move; returns the new row.
 */
export function moveJob(ctx: StoreContext, job: JobRow, to: JobState, changes: Partial<JobRow>, ...events: JobEvent[]): JobRow {
  assertMove(job.id, job.state, to)
  return writeJob(ctx, job, changes, to, events)
}

/**
 * The write of {@link updateJob} and {@link moveJob}: `changes`, then the new `state` (if any)
 * and the events' last id, as if they ended `changes`. They are not spread into it: every
 * caller's `changes` has a shape of its own, and a copy of each per write cost more than the
 * write's own JavaScript.
 */
function writeJob(ctx: StoreContext, job: JobRow, changes: Partial<JobRow>, state: JobState | undefined, events: readonly JobEvent[]): JobRow {
  const lastEventId = events.length > 0 ? appendJobEvents(ctx, job, events) : undefined
  // A copy of the row (in the one shape of copyJob) with the written values replaced.
  const updated = copyJob(job)
  const write = new ColumnWrites(job, updated)
  for (const column of Object.keys(changes) as (keyof JobRow)[]) {
    if (column === 'state' && state !== undefined) continue
    if (column === 'last_event_id' && lastEventId !== undefined) continue
    write.column(column, changes[column])
  }
  if (state !== undefined) write.column('state', state)
  if (lastEventId !== undefined) write.column('last_event_id', lastEventId)
  updated.updated_at = write.params[0] = ctx.clock.now()
  // By `seq`, the row's key: no lookup in the id index first.
  ctx.run(jobUpdateSql(write.written, write.key), ...write.params, job.seq)
  ctx.rowWrites.jobWritten(job, updated, write.written)
  return updated
}

/** The columns an UPDATE of a job writes, gathered one by one: a column whose value is unchanged is left out. */
class ColumnWrites {
  /** `updated_at`'s value first (set last), then each written column's. Positional: binding by name looks each one up on an object (context.ts `inserter`). */
  readonly params: unknown[] = [0]
  readonly written: (keyof JobRow)[] = []
  /** The written columns' digits in base 38: the key of their UPDATE's text (jobUpdateSql). */
  key = 0

  constructor(
    private readonly before: JobRow,
    private readonly after: JobRow,
  ) {}

  column(column: keyof JobRow, value: unknown): void {
    if (value === this.before[column] || column === 'updated_at') return
    ;(this.after as Record<keyof JobRow, unknown>)[column] = value
    this.params.push(value)
    const digit = JOB_COLUMN_DIGIT.get(column)
    if (digit === undefined) throw new Error(`updateJob: jobs has no column ${column}`)
    this.written.push(column)
    this.key = this.key * 38 + digit
  }
}

/** The UPDATE that writes `updated_at` and then the `written` columns, whose key is `key`. */
function jobUpdateSql(written: readonly (keyof JobRow)[], key: number): string {
  const keyed = written.length <= MAX_KEYED_COLUMNS
  let sql = keyed ? jobUpdates.get(key) : undefined
  if (sql === undefined) {
    sql = `UPDATE jobs SET updated_at = ?${written.map((column) => `, ${column} = ?`).join('')} WHERE seq = ?`
    if (keyed) jobUpdates.set(key, sql)
  }
  return sql
}

/** The one column {@link recordJobEvent} writes. */
const LAST_EVENT_ID: readonly (keyof JobRow)[] = ['last_event_id']

/**
 * Records an event of a job's timeline that comes with no other write of the job (a file lease
 * under its lease, a blocker, a firing of its schedule): the job's `last_event_id` alone is
 * written. Returns the job as it now is. A job named by id is read (an ACTIVE lease's from memory).
 */
export function recordJobEvent(ctx: StoreContext, jobOrId: JobRow | string, event: JobEvent): JobRow {
  const job = typeof jobOrId === 'string' ? (ctx.activeLeases.ofJob(jobOrId)?.job ?? getJob(ctx, jobOrId)) : jobOrId
  const last_event_id = appendJobEvents(ctx, job, [event])
  ctx.run('UPDATE jobs SET last_event_id = ? WHERE seq = ?', last_event_id, job.seq)
  const updated = copyJob(job)
  updated.last_event_id = last_event_id
  ctx.rowWrites.jobWritten(job, updated, LAST_EVENT_ID)
  return updated
}

/** Every column of a lease. */
const LEASE_COLUMNS = [
  'fence', 'id', 'job_id', 'attempt_id', 'worker_id', 'addon_id', 'cost_units', 'ttl_s', 'grace_s', 'state', 'token',
  'granted_at', 'last_heartbeat_at', 'expires_at', 'released_at', 'release_status', 'attempt', 'disposition', 'error', 'prev_fence',
] as const satisfies readonly (keyof LeaseRow)[]
/** Fails to compile while a column of the table is missing from the list. */
const allLeaseColumns: Exclude<keyof LeaseRow, (typeof LEASE_COLUMNS)[number]> extends never ? true : never = true
void allLeaseColumns

/** Writes a new ACTIVE lease (inside the grant's transaction). */
export function insertLease(ctx: StoreContext, lease: LeaseRow, job: JobRow): void {
  ctx.insert('leases', LEASE_COLUMNS, lease)
  ctx.rowWrites.leaseGranted(lease, job)
}

/** Writes a heartbeat's new expiry; returns the lease as it now is. */
export function extendLease(ctx: StoreContext, lease: LeaseRow, now: number, expiresAt: number): LeaseRow {
  ctx.run('UPDATE leases SET last_heartbeat_at = ?, expires_at = ? WHERE fence = ?', now, expiresAt, lease.fence)
  const extended = { ...lease, last_heartbeat_at: now, expires_at: expiresAt }
  ctx.rowWrites.leaseExtended(extended)
  return extended
}

/**
 * Writes a lease re-aimed after the wall clock was set back (verbs/reaper.ts): the moments its
 * limits count from, and its expiry.
 */
export function reaimLease(ctx: StoreContext, lease: LeaseRow, moments: Pick<LeaseRow, 'granted_at' | 'last_heartbeat_at' | 'expires_at'>): LeaseRow {
  ctx.run('UPDATE leases SET granted_at = ?, last_heartbeat_at = ?, expires_at = ? WHERE fence = ?', moments.granted_at, moments.last_heartbeat_at, moments.expires_at, lease.fence)
  const reaimed = { ...lease, ...moments }
  ctx.rowWrites.leaseExtended(reaimed)
  return reaimed
}

/** Writes a lease's new expiry alone: it lasts longer, and no heartbeat came (see renewLeasesOf). */
export function renewLeaseExpiry(ctx: StoreContext, lease: LeaseRow, expiresAt: number): LeaseRow {
  ctx.run('UPDATE leases SET expires_at = ? WHERE fence = ?', expiresAt, lease.fence)
  const renewed = { ...lease, expires_at: expiresAt }
  ctx.rowWrites.leaseExtended(renewed)
  return renewed
}

/** The lease with this id, or undefined: an ACTIVE one from memory, another from the table (see rowById). */
export const findLease = (ctx: StoreContext, leaseId: string): LeaseRow | undefined =>
  ctx.activeLeases.byId(leaseId)?.lease ?? rowById<LeaseRow>(ctx, 'SELECT * FROM leases', 'fence', leaseId)

export function getLease(ctx: StoreContext, leaseId: string): LeaseRow {
  const lease = findLease(ctx, leaseId)
  if (!lease) throw leaseNotFound(leaseId)
  return lease
}

/** The fence of the lease with this id (a job's `lease_id`), or null when there is none. */
export function fenceOfLease(ctx: StoreContext, leaseId: string | null): number | null {
  if (leaseId === null) return null
  return idKey(leaseId) ?? findLease(ctx, leaseId)?.fence ?? null
}

/**
 * A job's leases, first attempt first: a chain from its current or last lease (`jobs.lease_id`)
 * through each lease's `prev_fence`, so no index holds a job's leases. Empty for a job never leased.
 */
export function leasesOfJob(ctx: StoreContext, job: Pick<JobRow, 'lease_id'>): LeaseRow[] {
  const last = fenceOfLease(ctx, job.lease_id)
  if (last === null) return []
  return ctx.all<LeaseRow>(
    `WITH RECURSIVE chain(fence) AS (
       SELECT ? UNION ALL SELECT leases.prev_fence FROM leases JOIN chain ON leases.fence = chain.fence WHERE leases.prev_fence IS NOT NULL)
     SELECT leases.* FROM chain JOIN leases ON leases.fence = chain.fence ORDER BY leases.attempt`,
    last,
  )
}

/** The 409 for a write under a lease that is no longer ACTIVE. */
export function notActive(lease: LeaseRow, extra: ErrorExtra = {}): EngineError {
  return lease.state === 'EXPIRED'
    ? new EngineError('lease_expired', `Lease ${lease.id} expired`, extra)
    : new EngineError('lease_not_active', `Lease ${lease.id} was released (${lease.release_status})`, extra)
}

/** How an attempt ended, on its lease: what became of the job. */
export type Disposition = AttemptDisposition

/** A value as JSON text, or null for none. */
export const json = (value: unknown): string | null => (value === undefined || value === null ? null : JSON.stringify(value))

/** Ends a lease and the attempt it ran (one row): EXPIRED, or RELEASED with the attempt's outcome. */
export function endLease(
  ctx: StoreContext,
  lease: LeaseRow,
  state: 'RELEASED' | 'EXPIRED',
  status: FinalStatus | 'BLOCKED',
  disposition: Disposition,
  error: unknown,
): LeaseRow {
  const ended = { state, released_at: ctx.clock.now(), release_status: status, disposition, error: json(error) }
  ctx.run(
    'UPDATE leases SET state = ?, released_at = ?, release_status = ?, disposition = ?, error = ? WHERE fence = ?',
    ended.state,
    ended.released_at,
    ended.release_status,
    ended.disposition,
    ended.error,
    lease.fence,
  )
  ctx.rowWrites.leaseEnded(lease)
  return { ...lease, ...ended }
}

/** The job of a lease as it now is: from memory while the lease is ACTIVE. */
export function jobOfLease(ctx: StoreContext, lease: LeaseRow): JobRow {
  return ctx.activeLeases.ofJob(lease.job_id)?.job ?? getJob(ctx, lease.job_id)
}

