/**
 * The Leasehold database: one SQLite file that is the truth for jobs, leases, attempts and the
 * event log. Column names are the scheduler's own words in snake_case, so a raw row from
 * better-sqlite3 has the same shape as drizzle's inferred type. Times are epoch milliseconds;
 * they become ISO strings only at the HTTP and IPC edges. JSON columns hold text.
 *
 * After changing this file run `npm run db:generate` and commit the new file in drizzle/.
 */
import { sql } from 'drizzle-orm'
import { index, integer, primaryKey, real, sqliteTable, text, uniqueIndex } from 'drizzle-orm/sqlite-core'
import { COUNTED_EVENTS } from '../engine/rules/events'

/**
 * The jobs in the jobs_state_seq index: all but QUEUED (the engine keeps those in memory, in
 * pick order: src-main/engine/memory/queued-range.ts), LEASED and RUNNING (each holds an ACTIVE lease:
 * the engine keeps those in memory, src-main/engine/memory/active-leases.ts) and DONE (the bulk of all
 * jobs: a listing of them reads the table newest first, where they are dense). A job's life from
 * submit to DONE then writes no entry there. SQLite uses a partial index only for a query that
 * repeats its clause word for word, so queries include this text.
 *
 * The clause is a chain of `<>`, not `NOT IN (…)`: SQLite evaluates an IN list of more than two
 * values through a temporary B-tree it builds and drops each time, and it evaluates a partial
 * index's clause on every insert of a job and every update that writes `state` — three times in
 * every job's life, about a fifth of the engine's CPU in a drain (migration 0014).
 */
export const STATES_OUTSIDE_STATE_SEQ: readonly string[] = ['QUEUED', 'LEASED', 'RUNNING', 'DONE']
export const STATE_SEQ_CLAUSE = STATES_OUTSIDE_STATE_SEQ.map((state) => `state <> '${state}'`).join(' AND ')

/**
 * The rows whose id does not name their key: the jobs and leases made before ids did (migration
 * 0013), whose ids are random UUIDs version 7. A job's or lease's id now names its row's key
 * (src-main/engine/store/ids.ts `keyedId`, UUID version 8), so it is found without an index; these
 * older rows keep a partial unique index on their id, which no new row enters. A query must
 * repeat this clause word for word for SQLite to use it.
 */
export const UNKEYED_ID_CLAUSE = "substr(id, 15, 1) <> '8'"

/** The finished jobs: the states retention deletes from, once their `finished_at` is old enough. */
export const FINISHED_STATES_CLAUSE = "state IN ('DONE', 'FAILED', 'CANCELED', 'TIMEOUT')"

/** One row per job: the job itself plus the queue contract's `scheduler_job_runs` facts. */
export const jobs = sqliteTable(
  'jobs',
  {
    /** Insertion order; breaks ties in FIFO order and keys list cursors. */
    seq: integer('seq').primaryKey(),
    /** Names `seq` (src-main/engine/store/ids.ts), except in rows older than that (UNKEYED_ID_CLAUSE). */
    id: text('id').notNull(),
    addon_id: text('addon_id'),
    job_type: text('job_type').notNull(),
    /** 0 LOW, 1 NORMAL, 2 HIGH, 3 URGENT: higher is picked first. */
    priority: integer('priority').notNull(),
    cost_units: integer('cost_units').notNull(),
    constraints: text('constraints').notNull(),
    payload: text('payload').notNull(),
    is_unique: integer('is_unique').notNull(),
    idempotency_key: text('idempotency_key'),
    tags: text('tags').notNull(),
    max_runtime_s: integer('max_runtime_s'),
    queue: text('queue').notNull(),
    /** The most attempts the job may have had, all runs counted (an operator's retry raises it). */
    max_attempts: integer('max_attempts').notNull(),
    /** The attempts each run may use: `max_attempts` as submitted. A retry gives the job this many more. */
    attempt_budget: integer('attempt_budget').notNull().default(0),
    state: text('state').notNull(),
    attempts: integer('attempts').notNull(),
    claimed_by: text('claimed_by'),
    claim_expires_at: integer('claim_expires_at'),
    /** The current lease, or the last one once the job has ended. */
    lease_id: text('lease_id'),
    /**
     * the worker API's transport: the stream message (on the stream named by `queue`) that delivers
     * the job's current or next attempt. Every submit and every requeue gives the job a new one,
     * recorded in its JOB_SUBMITTED or JOB_REQUEUED event; it is acknowledged when the attempt it
     * delivered ends, so a job has at most one unacknowledged message: its current one.
     */
    stream_message_id: integer('stream_message_id'),
    /** When a requeued job may be taken again (exponential backoff); null if it may now. */
    next_retry_at: integer('next_retry_at'),
    /** When the job became eligible (submit, its `run_at`, or the end of its backoff): the FIFO key. */
    eligible_at: integer('eligible_at').notNull(),
    /**
     * When a delayed job is to run (its submit's `run_at` or `delay_ms`): it is not eligible
     * before. Null for a job that was not delayed, or that an operator ran at once.
     */
    run_at: integer('run_at'),
    cancel_requested: integer('cancel_requested').notNull(),
    progress: real('progress'),
    note: text('note'),
    /** 1 when the job ended because it ran out of attempts. */
    dead_letter: integer('dead_letter').notNull(),
    final_status: text('final_status'),
    error: text('error'),
    result: text('result'),
    metrics: text('metrics'),
    created_at: integer('created_at').notNull(),
    updated_at: integer('updated_at').notNull(),
    started_at: integer('started_at'),
    finished_at: integer('finished_at'),
    /**
     * The job's newest event: its timeline is a chain from here through each event's `prev_id`,
     * so no index holds a job's events (src-main/engine/reads/timeline.ts). Null for a job with no event
     * since migration 0013 (its earlier events are found through events_unchained_job).
     */
    last_event_id: integer('last_event_id'),
  },
  (t) => [
    // No index holds the QUEUED jobs (migration 0016 dropped jobs_pick_queue): the engine keeps
    // them in pick order in memory (src-main/engine/memory/queued-range.ts), read from the table once
    // at start. Each job's entry there cost an insert at submit and a delete at grant.
    // Claims of the queue API that may expire: a job has `claim_expires_at` exactly while a claim
    // holds it. (Keyed on the column, not on `state`: SQLite maintains a partial index on every
    // update that writes a column of its clause, so an index on `state` costs every move of every
    // job, and this one only the claims'.)
    index('jobs_claim_expiry').on(t.claim_expires_at).where(sql`claim_expires_at IS NOT NULL`),
    // Listing newest first by state, and counting a state, except the states STATE_SEQ_CLAUSE leaves out.
    index('jobs_state_seq').on(t.state, t.seq).where(sql.raw(STATE_SEQ_CLAUSE)),
    // The jobs made before ids named their key; no job made since enters it.
    uniqueIndex('jobs_unkeyed_id').on(t.id).where(sql.raw(UNKEYED_ID_CLAUSE)),
    // Partial: most jobs have neither, and every index entry is a page written per commit.
    index('jobs_addon_seq').on(t.addon_id, t.seq).where(sql`addon_id IS NOT NULL`),
    uniqueIndex('jobs_idempotency_key').on(t.idempotency_key).where(sql`idempotency_key IS NOT NULL`),
  ],
)

/**
 * One row per lease: the queue contract's `scheduler_lease_runs`, and the attempt the lease runs (one
 * execution of a job; completion and failure are idempotent by (job_id, attempt_id)).
 */
export const leases = sqliteTable(
  'leases',
  {
    /**
     * Strictly increasing over every lease ever granted: a later lease always has a larger
     * fence. Also the row's key, so a grant appends at the table's end.
     */
    fence: integer('fence').primaryKey(),
    /** Names `fence` (src-main/engine/store/ids.ts), except in rows older than that (UNKEYED_ID_CLAUSE). */
    id: text('id').notNull(),
    /** The job's id (no foreign key: that would need an index on every job's id). */
    job_id: text('job_id').notNull(),
    attempt_id: text('attempt_id').notNull(),
    worker_id: text('worker_id').notNull(),
    addon_id: text('addon_id'),
    cost_units: integer('cost_units').notNull(),
    ttl_s: integer('ttl_s').notNull(),
    grace_s: integer('grace_s').notNull(),
    /** ACTIVE, EXPIRED or RELEASED. */
    state: text('state').notNull(),
    /**
     * Secret handed only to the holder (the worker API names its lease by it, beside the job id:
     * the lease is found through the job, so the token needs no index of its own).
     */
    token: text('token').notNull(),
    granted_at: integer('granted_at').notNull(),
    last_heartbeat_at: integer('last_heartbeat_at').notNull(),
    expires_at: integer('expires_at').notNull(),
    released_at: integer('released_at'),
    /** SUCCEEDED, FAILED, CANCELED, TIMEOUT or BLOCKED: also the outcome of the lease's attempt. */
    release_status: text('release_status'),
    /** The job's attempt this lease runs (1, 2, …): a lease and its attempt are one row. */
    attempt: integer('attempt').notNull(),
    /** What became of the job when the attempt ended: REQUEUED, DEAD_LETTERED, FINAL or BLOCKED. */
    disposition: text('disposition'),
    /** The attempt's error (JSON), if it failed. */
    error: text('error'),
    /**
     * The fence of the job's lease before this one (its previous attempt), null for its first:
     * a job's leases are a chain from its current one (`jobs.lease_id`), found without an index.
     */
    prev_fence: integer('prev_fence'),
  },
  (t) => [
    // The leases granted before ids named their key; no lease granted since enters it. (The
    // ACTIVE leases are kept in memory, src-main/engine/memory/active-leases.ts: no index holds them.)
    uniqueIndex('leases_unkeyed_id').on(t.id).where(sql.raw(UNKEYED_ID_CLAUSE)),
  ],
)

/** The event types the statistics count (src-main/engine/rules/events.ts, in the order of the one list of event types). */
export const COUNTED_EVENTS_CLAUSE = `event_type IN (${COUNTED_EVENTS.map((type) => `'${type}'`).join(', ')})`

/**
 * The events of a job that are not on its chain (`jobs.last_event_id`, `events.prev_id`): those
 * appended before migration 0013. A job's event appended since always has a `prev_id` (0 for the
 * first of its chain), so none enters events_unchained_job.
 */
export const UNCHAINED_JOB_EVENTS_CLAUSE = 'prev_id IS NULL AND job_id IS NOT NULL'

/** The append-only event log (`scheduler_events`), written in the transaction it records. */
export const events = sqliteTable(
  'events',
  {
    /**
     * Increasing and never given twice, deleted rows' ids included: the engine hands them out
     * from a sequence reserved in `settings` (src-main/engine/store/counters.ts), not SQLite's largest
     * rowid plus one, so retention and purges may delete any event, and Last-Event-ID stays a
     * safe place to resume from (no AUTOINCREMENT page to write per event either).
     */
    id: integer('id').primaryKey(),
    ts: integer('ts').notNull(),
    /** JOB, LEASE, FILE_LEASE, BLOCKER, WORKER, CAPACITY, SCHEDULE or QUEUE. */
    entity_type: text('entity_type').notNull(),
    entity_id: text('entity_id').notNull(),
    /** The job this event belongs to, if any: a job's timeline includes its leases' events. */
    job_id: text('job_id'),
    event_type: text('event_type').notNull(),
    data: text('data').notNull(),
    /**
     * The job's event before this one (0 for its first), for an event that names a job: a job's
     * events are a chain from `jobs.last_event_id`. Null for an event that names no job, and for
     * a job's events appended before migration 0013.
     */
    prev_id: integer('prev_id'),
  },
  (t) => [
    // A job's events before migration 0013; no event appended since enters it.
    index('events_unchained_job').on(t.job_id, t.id).where(sql.raw(UNCHAINED_JOB_EVENTS_CLAUSE)),
    // The events that name no job (retention deletes them by age): no job's event enters it.
    index('events_jobless_ts').on(t.ts).where(sql`job_id IS NULL`),
  ],
)

/** Gauges sampled on a timer; the time-series endpoint reads these, so charts survive restarts. */
export const statsSamples = sqliteTable('stats_samples', {
  ts: integer('ts').primaryKey(),
  leases_active: integer('leases_active').notNull(),
  jobs_queued: integer('jobs_queued').notNull(),
  jobs_running: integer('jobs_running').notNull(),
  capacity_used: integer('capacity_used').notNull(),
  busy_rating: real('busy_rating').notNull(),
})

/** Queues an operator paused: their jobs are neither claimed nor leased until resumed. */
export const pausedQueues = sqliteTable('paused_queues', {
  queue: text('queue').primaryKey(),
  paused_at: integer('paused_at').notNull(),
  /** Who paused it, as the request said (`requested_by`), or null. */
  paused_by: text('paused_by'),
})

/**
 * The counted events (COUNTED_EVENTS_CLAUSE) per event type and minute (per hour once older than
 * the charts' longest range), up to the event whose id the `events_counted_through` setting
 * names: the engine adds them from time to time (src-main/engine/memory/recent-counts.ts), so the time
 * series read this table and the few events after that one instead of an index on the log, and
 * retention may delete a job's events without losing what they counted. `ts` is the start of the
 * minute or hour.
 */
export const statsCounts = sqliteTable(
  'stats_counts',
  {
    event_type: text('event_type').notNull(),
    ts: integer('ts').notNull(),
    n: integer('n').notNull(),
  },
  (t) => [primaryKey({ columns: [t.ts, t.event_type] })],
)

/** Operator settings that outlive a restart (total units, the busy rating's mode and value). */
export const settings = sqliteTable('settings', {
  key: text('key').primaryKey(),
  value: text('value').notNull(),
})

export type JobRow = typeof jobs.$inferSelect
export type LeaseRow = typeof leases.$inferSelect
/** An attempt as the API shows it: the attempt's columns of its lease row, under their own names. */
export interface AttemptRow {
  id: string
  job_id: string
  lease_id: string
  worker_id: string
  /** 1 for the first attempt. */
  number: number
  started_at: number
  finished_at: number | null
  /** SUCCEEDED, FAILED, CANCELED, TIMEOUT or BLOCKED; null while running. */
  outcome: string | null
  /** REQUEUED, DEAD_LETTERED, FINAL or BLOCKED; null while running. */
  disposition: string | null
  error: string | null
}
export type EventRow = typeof events.$inferSelect
export type StatsSampleRow = typeof statsSamples.$inferSelect
export type PausedQueueRow = typeof pausedQueues.$inferSelect

/**
 * File leases (the files contract): the right of one owner to mutate one file, keyed by the file's
 * normalized absolute path. At most one ACTIVE row per file (a unique partial index).
 */
export const fileLeases = sqliteTable(
  'file_leases',
  {
    id: text('id').primaryKey(),
    file: text('file').notNull(),
    owner_id: text('owner_id').notNull(),
    /** The job lease it is held under, if any: the owner is alive while that lease is ACTIVE. */
    lease_id: text('lease_id'),
    job_id: text('job_id'),
    /** ACTIVE, RELEASED, or REVOKED (taken by an operator's force release: the owner's writes are refused). */
    state: text('state').notNull(),
    acquired_at: integer('acquired_at').notNull(),
    last_heartbeat_at: integer('last_heartbeat_at').notNull(),
    released_at: integer('released_at'),
    /** released, idle, reclaimed, job_succeeded, job_failed, job_ended, force_released, overlapped */
    release_reason: text('release_reason'),
  },
  (t) => [
    uniqueIndex('file_leases_active_file').on(t.file).where(sql`state = 'ACTIVE'`),
    index('file_leases_active_idle').on(t.last_heartbeat_at).where(sql`state = 'ACTIVE'`),
    index('file_leases_lease').on(t.lease_id),
    index('file_leases_owner_file').on(t.owner_id, t.file),
    // Retention's own: the ended leases of owners without a job lease, which no job's deletion
    // takes (engine/verbs/prune.ts). A job's file leases never enter it.
    index('file_leases_jobless_ended').on(t.released_at).where(sql`lease_id IS NULL AND state <> 'ACTIVE'`),
  ],
)

/** A denied acquire and its one scheduled retry at `retry_at` (denied_at + 180 s). */
export const fileContentions = sqliteTable(
  'file_contentions',
  {
    file: text('file').notNull(),
    owner_id: text('owner_id').notNull(),
    lease_id: text('lease_id'),
    job_id: text('job_id'),
    /** The path whose lease refused it: the file, a folder above it, or a path inside it (null before paths covered one another: the file). */
    holder_file: text('holder_file'),
    denied_at: integer('denied_at').notNull(),
    retry_at: integer('retry_at').notNull(),
  },
  (t) => [primaryKey({ columns: [t.file, t.owner_id] })],
)


/**
 * A file an operator's force release handed to the halted requester: until it acquires the file
 * (or `until` passes), every other owner, the one it was taken from included, is refused it.
 */
export const fileHandovers = sqliteTable(
  'file_handovers',
  {
    file: text('file').primaryKey(),
    owner_id: text('owner_id').notNull(),
    /** The halted job it is kept for; null when the report named none (an owner acquiring without a job lease). */
    job_id: text('job_id'),
    blocker_id: text('blocker_id').notNull(),
    /** The lease the force release took (REVOKED). */
    file_lease_id: text('file_lease_id').notNull(),
    handed_at: integer('handed_at').notNull(),
    until: integer('until').notNull(),
  },
  (t) => [index('file_handovers_job').on(t.job_id)],
)

/** A blocker report: a job still blocked after its retry, halted until an operator answers. */
export const blockers = sqliteTable(
  'blockers',
  {
    id: text('id').primaryKey(),
    /** Creation order, for listing. */
    seq: integer('seq').notNull().unique(),
    file: text('file').notNull(),
    holder_owner_id: text('holder_owner_id').notNull(),
    holder_job_id: text('holder_job_id'),
    /** The path the holder held: the file, a folder above it, or a path inside it (null before paths covered one another: the file). */
    holder_file: text('holder_file'),
    holder_acquired_at: integer('holder_acquired_at').notNull(),
    holder_last_heartbeat_at: integer('holder_last_heartbeat_at').notNull(),
    retry_s: integer('retry_s').notNull(),
    denied_at: integer('denied_at').notNull(),
    retried_at: integer('retried_at').notNull(),
    requester_owner_id: text('requester_owner_id').notNull(),
    requester_job_id: text('requester_job_id'),
    requester_lease_id: text('requester_lease_id'),
    /** OPEN or RESOLVED. */
    state: text('state').notNull(),
    /** retry, force_release or cancel. */
    resolution: text('resolution'),
    note: text('note'),
    resolved_by: text('resolved_by'),
    resolved_at: integer('resolved_at'),
    /** A force_release: 1 when the holder the report names still held the file and lost it, 0 when it had let go (nothing taken); null otherwise. */
    taken_from_holder: integer('taken_from_holder'),
    created_at: integer('created_at').notNull(),
  },
  (t) => [
    index('blockers_state_seq').on(t.state, t.seq),
    index('blockers_requester_job').on(t.requester_job_id),
    // The resolved reports, most recently answered first (an old report answered now heads the list).
    index('blockers_resolved').on(t.resolved_at, t.seq).where(sql`state = 'RESOLVED'`),
  ],
)

export type FileLeaseRow = typeof fileLeases.$inferSelect
export type FileContentionRow = typeof fileContentions.$inferSelect
export type FileHandoverRow = typeof fileHandovers.$inferSelect
export type BlockerRow = typeof blockers.$inferSelect

/**
 * Recurring schedules (docs/schedules.md): a cron expression in a time zone and the job each
 * firing submits. `next_fire_at` is the earliest firing not yet handled; the timer sleeps until
 * the smallest one among enabled schedules.
 */
export const schedules = sqliteTable(
  'schedules',
  {
    id: text('id').primaryKey(),
    /** The schedule's key in the API and on the command line. */
    name: text('name').notNull().unique(),
    cron: text('cron').notNull(),
    /** An IANA time zone, e.g. Europe/Berlin; the host's own when the schedule was created without one. */
    timezone: text('timezone').notNull(),
    /** The job each firing submits: the submit fields as JSON (src-main/engine/verbs/schedules.ts JobTemplate). */
    job: text('job').notNull(),
    /** allow: fire whatever runs; skip: skip a firing while the last one's job is unfinished. */
    overlap: text('overlap').notNull(),
    enabled: integer('enabled').notNull(),
    /** The earliest firing not yet handled; null while disabled (or when the expression never fires again). */
    next_fire_at: integer('next_fire_at'),
    /**
     * Counts the changes to its settings (cron, timezone, job, overlap), 1 at its creation: the
     * ETag of its view, which an edit names in If-Match to be refused when made from an old read.
     * Its firings and its pausing leave it as it is (docs/schedules.md, "Editing from a read").
     */
    revision: integer('revision').notNull().default(1),
    created_at: integer('created_at').notNull(),
    updated_at: integer('updated_at').notNull(),
  },
  (t) => [index('schedules_due').on(t.next_fire_at).where(sql`enabled = 1`)],
)

/**
 * One row per handled firing: the exactly-once key (schedule, fire time) is a unique index, so a
 * firing can never make a second job. A run that made a job still kept stays after its schedule
 * is deleted: it says which schedule made the job. Runs go with their jobs, and runs that made no
 * job after the retention period, each schedule's newest run and newest run that fired excepted
 * (engine/verbs/prune.ts); nothing here holds a job back from pruning.
 */
export const scheduleRuns = sqliteTable(
  'schedule_runs',
  {
    /**
     * Insertion order: a schedule's newest run is the one made last, whatever its fire time (a
     * clock set back makes firings earlier than one already made).
     */
    seq: integer('seq').primaryKey(),
    schedule_id: text('schedule_id').notNull(),
    fire_at: integer('fire_at').notNull(),
    /** The schedule's name when it fired. */
    schedule_name: text('schedule_name').notNull(),
    /** FIRED (a job was submitted) or SKIPPED (overlap, or the submit was refused: see reason). */
    outcome: text('outcome').notNull(),
    job_id: text('job_id'),
    reason: text('reason'),
    created_at: integer('created_at').notNull(),
  },
  (t) => [
    uniqueIndex('schedule_runs_firing').on(t.schedule_id, t.fire_at),
    // A schedule's runs in the order they were made: its newest run, and its newest that fired.
    index('schedule_runs_schedule_seq').on(t.schedule_id, t.seq),
    index('schedule_runs_job').on(t.job_id).where(sql`job_id IS NOT NULL`),
  ],
)

export type ScheduleRow = typeof schedules.$inferSelect
export type ScheduleRunRow = typeof scheduleRuns.$inferSelect

/**
 * The Redis transport's outbox (leasehold serve --redis; empty without it): one row per message
 * Redis should hold, that is the current message of each unfinished job. Inserted in the
 * transaction of the job write that gave the message (a submit, a requeue, a retry) and deleted
 * in the one that ended its attempt (a final state, or a newer message), so after a crash the
 * relay compares each stream with this table and puts Redis right: no message is lost between a
 * commit and Redis, none is left over. A host without Redis keeps no rows: one started with Redis
 * fills the table from the jobs first (engine/store/outbox.ts, fillStep).
 */
export const redisOutbox = sqliteTable('redis_outbox', {
  /** The job's `stream_message_id`: its enqueue identity, increasing, never given twice. */
  enqueue_id: integer('enqueue_id').primaryKey(),
  job_id: text('job_id').notNull(),
  /** The job's queue: the stream is `<prefix>q:<queue>`. */
  queue: text('queue').notNull(),
  created_at: integer('created_at').notNull(),
})
