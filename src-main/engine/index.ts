import type { Database } from 'better-sqlite3'
import { connectionPath } from '../db/connection'
import type { CapacityChange, CapacityStore } from './memory/capacity-store'
import { type CapacityFigures, type CapacitySettings, FIRST_CAPACITY } from './rules/capacity'
import { type Clock, SleepWatch } from './rules/clock'
import { EngineContext, SLEEPS_KEPT } from './memory/context'
import { type CommitListener, DEFAULT_ENGINE_CONFIG, type EngineConfig, type EventListener } from './store/context'
import * as batch from './verbs/batch'
import * as blockers from './verbs/blockers'
import * as bulk from './verbs/bulk'
import * as capacityVerbs from './verbs/capacity'
import {
  type AcquireResult,
  type ActiveLease,
  type Attempt,
  type AttemptEnded,
  type Blocker,
  type Claims,
  type Event,
  type ExchangeAnswer,
  type FileLease,
  type Job,
  type JobLeaseDecision,
  type JobPage,
  type LeaseDecision,
  type Lease,
  type Leased,
  type LeaseExtended,
  type Released,
  type SubmitResult,
  toAcquireResult,
  toActiveLease,
  toAttempt,
  toAttemptEnded,
  toBlocker,
  toClaims,
  toEvent,
  toExchangeAnswer,
  toFileLease,
  toItem,
  toJob,
  toJobLeaseDecision,
  toLease,
  toLeased,
  toLeaseDecision,
  toLeaseExtended,
  toSubmitResult,
} from './domain'
import { newestEventId, replayAfter } from './store/event-log'
import type { RestoredBackup } from './store/counters'
import type { WorkerProblem } from './rules/events'
import * as files from './verbs/files'
import * as jobs from './verbs/jobs'
import { activeLeases, jobAttempts } from './reads/lease-reads'
import * as attempts from './verbs/attempt-reports'
import * as grants from './verbs/grants'
import * as heartbeats from './verbs/heartbeats'
import { provenLease } from './verbs/lease-lookup'
import { getJob, getLease } from './store/rows'
import { Outbox } from './store/outbox'
import { databaseId } from './store/settings'
import { listJobs, listJobsOn, type JobListQuery, type PageQuery, type PageRequest } from './reads/list'
import { nextEligibleAt, type WorkerFilter } from './reads/pick'
import * as queues from './verbs/queues'
import { retryJob } from './verbs/retry'
import * as prune from './verbs/prune'
import * as reaper from './verbs/reaper'
import * as schedules from './verbs/schedules'
import * as stats from './reads/stats'
import { sampleStats } from './verbs/stats-samples'
import { pruneStatsStep } from './verbs/stats-retention'
import * as storage from './store/storage'
import { LEASED_STATES, WAITING_STATES } from './rules/states'
import { NO_WORKERS_KNOWN, readSituation, type Waiting, waitingFor, type WorkersAtHand } from './reads/waiting'

// The engine's public face: this facade and the decoded domain types. Outside engine/ and db/
// nothing reads a row, SQL or the engine's context (test/unit/boundary.test.ts holds the host to it).
export type { CommitListener, EngineConfig, EventListener } from './store/context'
export { DEFAULT_ENGINE_CONFIG } from './store/context'
export { ENGINE_ERROR_CODES, EngineError, type EngineErrorCode, type ErrorExtra } from './rules/errors'
export {
  ATTEMPT_DISPOSITIONS,
  ATTEMPT_OUTCOMES,
  BLOCKER_STATES,
  FILE_LEASE_STATES,
  type AcquireResult,
  type ActiveLease,
  type Assignment,
  type Attempt,
  type AttemptDisposition,
  type AttemptEnded,
  type AttemptOutcome,
  type Blocker,
  type BlockerState,
  type Claims,
  type Denial,
  type Event,
  type ExchangeAnswer,
  type FileLease,
  type FileLeaseState,
  type Job,
  type JobLeaseDecision,
  type JobPage,
  type Lease,
  type LeaseDecision,
  type Leased,
  type LeaseExtended,
  type Released,
  type SubmitResult,
} from './domain'
export { ENTITY_TYPES, EVENT_TYPES, WAKE_EVENTS, type EntityType, type EventData, type EventType, type WorkerProblem } from './rules/events'
export type { CapacityChange } from './memory/capacity-store'
export type { CapacityFigures, CapacitySettings } from './rules/capacity'
export type { Contention } from './rules/file-leases'
export type { FileLeaseRequest } from './verbs/files'
export { FILE_IDLE_MS, heartbeatIntervalS } from './verbs/files'
export type { AttemptError } from './verbs/attempt-reports'
export type { LeaseRequestForJob, WaitingClaim } from './verbs/grants'
export { type NobodyTakes, type Waiting, type WaitingJobNeeds, type Walk, WHOLE_LINE, type WorkersAtHand } from './reads/waiting'
export type { Outcome } from './verbs/lease-end'
export type { SparedWorkers } from './verbs/reaper'
export type { HeartbeatReport } from './store/rows'
export type { JobListQuery } from './reads/list'
export type { WorkerFilter } from './reads/pick'
export type { EndedMessage, Outbox, OutboxBacklog, OutboxChanges, OutboxFillCursor, OutboxFillStep, OutboxGrant, OutboxMessage } from './store/outbox'
export { streamMessageName } from './store/streams'
export { checkSubmit, DEFAULT_PRIORITY, DEFAULT_QUEUE, MAX_DELAY_MS, type StatusUpdate, type SubmitJob } from './verbs/jobs'
export { RESOLUTIONS, type Resolution } from './rules/blockers'
export type { ResolveBlocker } from './verbs/blockers'
export type { Overlap } from './rules/schedules'
export {
  OVERLAP_POLICIES,
  RUN_OUTCOMES,
  SCHEDULE_NAME,
  SCHEDULE_STATES,
  type ExpectedRevisions,
  type Firing,
  type JobTemplate,
  type Schedule,
  type ScheduleChange,
  type ScheduleInput,
  type ScheduleOrigin,
  type ScheduleRun,
} from './verbs/schedules'
export { type EveryField, HEARD_AT, MAX_BATCH_ITEMS, MAX_CLAIM_JOBS, type ItemResult, type WorkerExchange } from './verbs/batch'
export { BULK_ACTIONS, BULK_STATES, type BulkAction, type BulkCursor, type BulkFilter, type BulkPlan, type BulkStep } from './verbs/bulk'
export type { CountedState, QueuePause, QueueSummary } from './verbs/queues'
export { BUCKETS, METRICS, RANGES, type Bucket, type Metric, type Range, type Snapshot, type StatsSample, type TimeseriesPoint } from './reads/stats'
export { PRUNE_BATCH, pruneCutoff } from './verbs/prune'
export { STATS_RETAIN_MS } from './verbs/stats-retention'
export type { StorageFigures } from './store/storage'

export interface EngineOptions {
  db: Database
  clock: Clock
  config?: Partial<EngineConfig>
  /** Capacity settings used until an operator changes them (then the stored ones win). */
  capacity?: CapacitySettings
}

/**
 * The scheduler: every scheduling rule (docs/architecture.md) as one method per verb, each atomic
 * with the events it appends: called on its own, a verb is one SQLite transaction; called in a
 * commit group, it runs under a savepoint of the group's transaction, so one that throws undoes
 * only itself, and it is durable when the group commits (store/transaction.ts). It knows no
 * HTTP, Electron or timers; the APIs adapt its results,
 * and the host's timers call {@link Engine.reap} and {@link Engine.sampleStats}.
 */
export class Engine {
  // Private: the engine's own modules take it as a parameter; its white-box tests reach it
  // through engine/internals.ts.
  private readonly ctx: EngineContext
  /** The context's capacity, handed to the verbs that weigh it. */
  private readonly capacity: CapacityStore
  /** Where retention's sweep over the jobs goes on (prune.ts). */
  private readonly retentionSweep: prune.RetentionSweep = { after: 0 }
  private redisOutbox: Outbox | null = null
  /** Sees the machine sleep, so that no holder loses what it holds to the time asleep ({@link noticeSleep}). */
  private readonly sleeps: SleepWatch
  private readonly sleptListeners = new Set<(sleptMs: number, renewed: reaper.SleepRenewals) => void>()

  constructor(options: EngineOptions) {
    this.ctx = new EngineContext(options.db, options.clock, { ...DEFAULT_ENGINE_CONFIG, ...options.config }, options.capacity ?? FIRST_CAPACITY)
    this.capacity = this.ctx.capacityStore
    this.ctx.load()
    this.sleeps = new SleepWatch(options.clock)
  }

  get config(): EngineConfig {
    return this.ctx.config
  }

  /** The time on the engine's clock (epoch ms): what "now" is for every rule, and for the views that show ages. */
  now(): number {
    return this.ctx.clock.now()
  }

  /** The database file ('' or ':memory:' in tests); its folder is the data dir a storage fault names. */
  get databaseFile(): string {
    return connectionPath(this.ctx.db.name)
  }

  /** Listens to committed events, one at a time in the order they were appended; returns the function that stops listening. */
  onEvent(listener: EventListener): () => void {
    return this.ctx.onEvent(listener)
  }

  /** Called once per commit with its events, after the event listeners (see EngineContext.onCommit). */
  onCommit(listener: CommitListener): () => void {
    return this.ctx.onCommit(listener)
  }

  /**
   * Called right after every commit, with events or without (a heartbeat's has none), before
   * anyone hears of it: for what must only know that the database changed (the checkpointer).
   */
  onEveryCommit(listener: () => void): () => void {
    return this.ctx.onEveryCommit(listener)
  }

  /**
   * Called when a commit failed at its sync (db/commit-outcome.ts `isFailedSync`), once its
   * outcome is settled and before anyone hears of it: the host stops taking writes. The listener
   * runs inside the failed commit and must not call the engine before its stack unwinds.
   */
  onSyncFailed(listener: (error: unknown) => void): () => void {
    return this.ctx.onSyncFailed(listener)
  }

  /** Called just before each commit, inside its transaction (see EngineContext.beforeCommit). */
  beforeCommit(listener: CommitListener): () => void {
    return this.ctx.beforeCommit(listener)
  }

  /**
   * The claims that wait for work (src-main/dispatch/, oldest first): a job submitted while
   * they wait is leased in its own submit to the first that would take it, when that is certain
   * (grants.ts `grantOnSubmit`), and `leased` hears of it inside that transaction — the claim is
   * answered once it commits, which is then at the end of that operation. One source at a time;
   * returns the function that stops it.
   */
  serveWaitingClaims(claims: { waiting(): readonly grants.WaitingClaim[]; leased(claim: grants.WaitingClaim, claimed: Claims): () => void }): () => void {
    const source: grants.WaitingClaims = { waiting: () => claims.waiting(), leased: (claim, heads) => claims.leased(claim, toClaims(heads)) }
    const leaseOnSubmit: EngineContext['waitingClaims'] = (job) => grants.grantOnSubmit(this.ctx, this.capacity, source, job)
    this.ctx.waitingClaims = leaseOnSubmit
    return () => {
      if (this.ctx.waitingClaims === leaseOnSubmit) this.ctx.waitingClaims = null
    }
  }

  /**
   * Group commit: runs `op` (one or more verbs) in the commit group of this event-loop turn and
   * settles once the group is durable. Transports use it for every operation they answer, so
   * that many operations share one commit; see EngineContext.runGrouped.
   */
  run<T>(op: () => T): Promise<T> {
    this.noticeSleep()
    return this.ctx.runGrouped(op)
  }

  /**
   * Makes good a sleep of the machine (or a clock set ahead) before anything judges a lease by
   * the clock: every lease, claim and file lease held counts its silence from now
   * (reaper.ts `renewAfterSleep`). Without it a laptop that wakes would take every running job
   * from its worker, which slept too. {@link run} and {@link reap} call it: every call that can
   * judge a lease (a worker's heartbeat or report, over any transport, and the reaper's pass)
   * comes through one of them, and the first after the machine wakes makes it good. It costs two
   * reads of the clocks. A renewal that fails (a full disk) is tried again at the next call.
   */
  noticeSleep(): void {
    const slept = this.sleeps.look()
    if (slept === 0 || this.ctx.insideOperation) return
    let renewed: reaper.SleepRenewals
    try {
      renewed = reaper.renewAfterSleep(this.ctx)
    } catch {
      return
    }
    this.sleeps.madeGood()
    this.ctx.sleeps.push({ wokeAt: this.ctx.clock.now(), sleptMs: slept })
    if (this.ctx.sleeps.length > SLEEPS_KEPT) this.ctx.sleeps.shift()
    for (const listener of this.sleptListeners) listener(slept, renewed)
  }

  /** Hears each sleep of the machine {@link noticeSleep} made good, with what it renewed; returns the function that stops listening. */
  onSleep(listener: (sleptMs: number, renewed: reaper.SleepRenewals) => void): () => void {
    this.sleptListeners.add(listener)
    return () => this.sleptListeners.delete(listener)
  }

  /**
   * Called inside a {@link run} operation whose answer waits for work anyway (a worker's
   * reports sent with a claim that now waits): nobody waits for its commit, so its group may
   * stay open for the operation that brings the work, and commit with it (see EngineConfig.groupWaitMs).
   */
  commitMayWait(): void {
    this.ctx.commitMayWait()
  }

  /** Transactions committed since the engine started: with {@link run}'s operations counted, how much groups gather. */
  get commits(): number {
    return this.ctx.commits
  }

  /**
   * The Redis transport's outbox (engine/store/outbox.ts), subscribed to the write journal from the
   * first call on: each new stream message gets its row in the transaction that gave it, and its
   * queue's count in memory. Only a host that carries its queues over Redis calls this; without it
   * no row is written. The first call counts the rows a previous run left, per queue.
   */
  outbox(): Outbox {
    if (!this.redisOutbox) {
      this.redisOutbox = new Outbox(this.ctx)
      this.redisOutbox.load()
      this.ctx.rowWrites.subscribe(this.redisOutbox)
    }
    return this.redisOutbox
  }

  /** Commits the open group now, if any: before the database is closed, and before dispatch offers the queue from a timer. */
  flush(): void {
    this.ctx.flush()
  }

  // Jobs
  submit = (input: jobs.SubmitJob): SubmitResult => toSubmitResult(jobs.submit(this.ctx, input, this.capacity.totalUnits(), true))
  getJob = (jobId: string): Job => toJob(getJob(this.ctx, jobId))
  listJobs = (query: JobListQuery): JobPage => {
    const page = listJobs(this.ctx, query)
    return { jobs: page.jobs.map(toJob), next_cursor: page.next_cursor }
  }
  /** {@link listJobs} with its query of the table run by `read`, the host's read thread (db/read-thread.ts). */
  listJobsOn = async (query: JobListQuery, read: (page: PageQuery) => Promise<unknown[]>): Promise<JobPage> => {
    const page = await listJobsOn(this.ctx, query, read)
    return { jobs: page.jobs.map(toJob), next_cursor: page.next_cursor }
  }
  /** A read of {@link listJobsOn}'s, run on the main connection (where the host has no read thread). */
  readOnMain = (read: PageQuery): unknown[] => this.ctx.all<unknown>(read.sql, ...read.params)
  cancel = (jobId: string, reason?: string | null, requestedBy?: string | null): Job => toJob(jobs.cancel(this.ctx, jobId, reason, requestedBy))
  updateStatus = (jobId: string, update: jobs.StatusUpdate): Job => toJob(jobs.updateStatus(this.ctx, jobId, update))
  /** A job's timeline: its own events and its leases', oldest first. */
  jobEvents = (jobId: string): Event[] => jobs.jobEvents(this.ctx, jobId).map(toEvent)
  /** A page of a job's timeline, oldest first: its newest events, or those before a cursor's page (reads/timeline.ts). */
  jobEventsPage = (jobId: string, page: PageRequest = {}): { events: Event[]; next_cursor: string | null } => {
    const found = jobs.jobEventsPage(this.ctx, jobId, page)
    return { events: found.events.map(toEvent), next_cursor: found.next_cursor }
  }
  /**
   * Why each of these jobs waits, and until when (null for one that runs, its file gate open, or
   * has ended), read against the workers at hand: which take a job, and whether one without a GPU
   * does (none known by default). For views, not hot paths.
   */
  waiting = (list: readonly Job[], workers: WorkersAtHand = NO_WORKERS_KNOWN): (Waiting | null)[] => {
    // A page of finished jobs needs none of the situation's reads.
    if (!list.some((job) => WAITING_STATES.has(job.state) || LEASED_STATES.has(job.state))) return list.map(() => null)
    const situation = readSituation(this.ctx, this.capacity, workers)
    return list.map((job) => waitingFor(job, situation))
  }
  /** A job's attempts, first first. */
  attempts = (jobId: string): Attempt[] => jobAttempts(this.ctx, jobId).map(toAttempt)
  /** The ACTIVE leases with their job's type, soonest expiry first. */
  activeLeases = (): ActiveLease[] => activeLeases(this.ctx).map(toActiveLease)

  // Leases
  /** the pull API: dequeue and lease in one step; the job becomes LEASED. */
  requestLease = (filter: WorkerFilter, ttl_s?: number): LeaseDecision =>
    toLeaseDecision(grants.leaseNext(this.ctx, this.capacity, filter, { ttl_s, to: 'LEASED' }))
  /** the worker API: claim = lease + attempt + token; the job becomes RUNNING. (Workers claim through {@link claimBatch}.) */
  claimAndLease = (filter: WorkerFilter, ttl_s?: number): LeaseDecision =>
    toLeaseDecision(grants.leaseNext(this.ctx, this.capacity, filter, { ttl_s, to: 'RUNNING' }))
  /** the queue API: claim now, lease later. */
  claim = (filter: WorkerFilter, limit = 1): Job[] => grants.claimJobs(this.ctx, filter, limit).map(toJob)
  requestLeaseForJob = (request: grants.LeaseRequestForJob): JobLeaseDecision =>
    toJobLeaseDecision(grants.requestLeaseForJob(this.ctx, this.capacity, request))
  getLease = (leaseId: string): Lease => toLease(getLease(this.ctx, leaseId))
  /** Heartbeat naming the lease by id (the pull and queue APIs). */
  heartbeat = (request: Parameters<typeof heartbeats.heartbeat>[1]): Leased => toLeased(heartbeats.heartbeat(this.ctx, request))
  /** Heartbeat naming the lease by its token (the worker API). */
  heartbeatByToken = (request: Parameters<typeof heartbeats.heartbeatByToken>[1]): LeaseExtended =>
    toLeaseExtended(heartbeats.heartbeatByToken(this.ctx, request))
  release = (request: attempts.ReleaseRequest): Released => {
    const released = attempts.releaseLease(this.ctx, request)
    return { ...toLeased(released), replay: released.replay }
  }
  complete = (request: Parameters<typeof attempts.completeAttempt>[1]): AttemptEnded => toAttemptEnded(attempts.completeAttempt(this.ctx, request))
  fail = (request: Parameters<typeof attempts.failAttempt>[1]): AttemptEnded => toAttemptEnded(attempts.failAttempt(this.ctx, request))

  // Batches: each item answered as its one-job verb would answer it (see batch.ts)
  submitMany = (inputs: jobs.SubmitJob[]): batch.ItemResult<SubmitResult>[] =>
    batch.submitMany(this.ctx, this.capacity, inputs).map((result) => toItem(result, toSubmitResult))
  /** the worker API claim of up to `maxJobs` jobs, stopping at the first denial. */
  claimBatch = (filter: WorkerFilter, maxJobs: number, ttl_s?: number): Claims => toClaims(batch.claimBatch(this.ctx, this.capacity, filter, maxJobs, ttl_s))
  /**
   * A waiting claim's turn inside a commit (called from a {@link beforeCommit} listener): claims
   * as {@link claimBatch} does, in the committing transaction under a savepoint of its own, so a
   * claim that fails undoes only itself (and answers undefined).
   */
  claimInCommit = (filter: WorkerFilter, maxJobs: number, ttl_s?: number): Claims | undefined => {
    // A claim that is denied before any write (the capacity is gone, or the commit's new work
    // already went to an earlier waiter) needs no savepoint: the next waiters are asked cheaply.
    const known = grants.knownDenial(this.ctx, this.capacity.figures(), filter)
    return known ? { granted: [], denial: known } : this.ctx.attempt(() => this.claimBatch(filter, maxJobs, ttl_s))
  }
  /** A worker's reports (heartbeats, completions, failures) and a claim for its free slots, in one call. */
  exchange = (request: batch.WorkerExchange): ExchangeAnswer => toExchangeAnswer(batch.exchange(this.ctx, this.capacity, request))

  // Delayed jobs, paused queues, retries and bulk operations (docs/operations.md)
  /** Runs a delayed job now (409 `not_scheduled` unless it waits for its `run_at`). */
  runNow = (jobId: string, requestedBy: string | null = null): Job => toJob(jobs.runNow(this.ctx, jobId, requestedBy))
  /** A FAILED, TIMEOUT or CANCELED job back to QUEUED as a new run with a fresh attempt budget. */
  retry = (jobId: string, requestedBy: string | null = null): Job => toJob(retryJob(this.ctx, jobId, this.capacity.totalUnits(), requestedBy))
  pauseQueue = (queue: string, requestedBy: string | null = null): queues.QueuePause => queues.pauseQueue(this.ctx, queue, requestedBy)
  resumeQueue = (queue: string, requestedBy: string | null = null): queues.QueuePause => queues.resumeQueue(this.ctx, queue, requestedBy)
  /** Every queue with jobs other than DONE ones, or paused, with its counts by state. */
  listQueues = (): queues.QueueSummary[] => queues.listQueues(this.ctx)
  /** Checks and plans a bulk retry, cancel or purge; {@link bulkStep} then runs it step by step. */
  planBulk = (action: bulk.BulkAction, request: Parameters<typeof bulk.planBulk>[2]): bulk.BulkPlan => bulk.planBulk(this.ctx, action, request)
  /** One step of a bulk call, its own transaction: call it outside {@link run}, and let other work in between steps. */
  bulkStep = (plan: bulk.BulkPlan, cursor: bulk.BulkCursor): bulk.BulkStep => bulk.bulkStep(this.ctx, this.capacity, plan, cursor)

  // File leases and blockers (the files contract)
  acquireFile = (request: files.FileLeaseRequest): AcquireResult => toAcquireResult(files.acquireFile(this.ctx, request))
  heartbeatFile = (request: files.FileLeaseRef): FileLease => toFileLease(files.heartbeatFile(this.ctx, request))
  /** At a start: the ACTIVE file leases that overlap one granted before them are revoked (verbs/files.ts); each with the lease that kept its path. */
  revokeOverlappingFiles = (): { revoked: FileLease; kept: FileLease }[] =>
    files.revokeOverlappingFiles(this.ctx).map(({ revoked, kept }) => ({ revoked: toFileLease(revoked), kept: toFileLease(kept) }))
  releaseFile = (request: files.FileLeaseRef): FileLease => toFileLease(files.releaseFile(this.ctx, request))
  fileRetryAt = (file: string, ownerId: string): number | null => files.fileRetryAt(this.ctx, file, ownerId)
  /** Refuses a file request from a worker token that does not prove its job lease (lease-lookup.ts provenLease). */
  proveJobLease = (request: { lease_id?: string | null; lease_token?: string | null }): void => void provenLease(this.ctx, request)
  listFileLeases = (state: FileLease['state'] | null = 'ACTIVE', page?: PageRequest): { file_leases: FileLease[]; next_cursor: string | null } => {
    const found = files.listFileLeases(this.ctx, state, page)
    return { file_leases: found.file_leases.map(toFileLease), next_cursor: found.next_cursor }
  }
  listBlockers = (state: Blocker['state'] | null = null, page?: PageRequest): { blockers: Blocker[]; next_cursor: string | null } => {
    const found = blockers.listBlockers(this.ctx, state, page)
    return { blockers: found.blockers.map(this.blockerNow), next_cursor: found.next_cursor }
  }
  openBlockerCount = (): number => blockers.openBlockerCount(this.ctx)
  getBlocker = (blockerId: string): Blocker => this.blockerNow(blockers.getBlocker(this.ctx, blockerId))
  resolveBlocker = (blockerId: string, answer: blockers.ResolveBlocker): { blocker: Blocker; taken_from_holder: boolean | null } => {
    const resolved = blockers.resolveBlocker(this.ctx, blockerId, answer)
    return { blocker: this.blockerNow(resolved.blocker), taken_from_holder: resolved.taken_from_holder }
  }
  /** A report as it was made, and since when its holder holds the file now (if it does). */
  private blockerNow = (row: Parameters<typeof toBlocker>[0]): Blocker => toBlocker(row, files.namedHoldersLease(this.ctx, row)?.acquired_at ?? null)

  /** Records what a worker reports for an operator to see (a handler that failed to load…): a WORKER_PROBLEM event. */
  recordWorkerProblem = (workerId: string, problem: WorkerProblem): void =>
    this.ctx.transact(() => this.ctx.appendEvent('WORKER', workerId, 'WORKER_PROBLEM', { kind: problem.kind, detail: problem.detail }))

  // The event log
  /** The newest event's id (0 for an empty log): where a resuming stream client stands against the log. */
  newestEventId = (): number => newestEventId(this.ctx)
  /** What a stream client resuming after `after` is told it missed (a gap) and is sent, at most `limit` events (store/event-log.ts replayAfter). */
  replayAfter = (after: number, limit: number): { gap: { missed_from: number; missed_to: number } | null; events: Event[] } => {
    const { gap, events } = replayAfter(this.ctx, after, limit)
    return { gap, events: events.map(toEvent) }
  }

  // Recurring schedules (docs/schedules.md)
  createSchedule = (input: schedules.ScheduleInput): schedules.Schedule => schedules.createSchedule(this.ctx, this.capacity, input)
  /** `expected`: the revisions the change was made from (If-Match); another is 412 `precondition_failed`, nothing written. */
  updateSchedule = (name: string, change: schedules.ScheduleChange, expected?: schedules.ExpectedRevisions): schedules.Schedule =>
    schedules.updateSchedule(this.ctx, this.capacity, name, change, expected)
  deleteSchedule = (name: string, expected?: schedules.ExpectedRevisions): schedules.Schedule => schedules.deleteSchedule(this.ctx, name, expected)
  getSchedule = (name: string): schedules.Schedule => schedules.getSchedule(this.ctx, name)
  listSchedules = (): schedules.Schedule[] => schedules.listSchedules(this.ctx)
  /** Which schedule firing made each of these jobs (for the job views). */
  scheduleOrigins = (jobIds: readonly string[]): Map<string, schedules.ScheduleOrigin> => schedules.scheduleOrigins(this.ctx, jobIds)

  // Time-driven work
  /** Fires the schedules due now, each once (its latest due firing); the schedule timer calls it. */
  fireDueSchedules = (): schedules.Firing[] => schedules.fireDueSchedules(this.ctx, this.capacity)
  /** When the earliest enabled schedule fires next, or null. */
  nextScheduleFireAt = (): number | null => schedules.nextScheduleFireAt(this.ctx)
  /** Re-aims the schedules whose next firing was reckoned on a clock since set back; how many moved. */
  reaimSchedules = (): number => schedules.reaimSchedules(this.ctx)
  /** Makes good a sleep of the machine ({@link noticeSleep}) and re-aims what a clock set back stretched (reaper.ts `reaimAfterSetBack`), then expires due leases (but those of spared workers: {@link spareLeases}), claims and idle file leases; returns how many of each. */
  reap = (): { leases: number; claims: number; idleFiles: number } => {
    this.noticeSleep()
    return {
      leases: reaper.expireDueLeases(this.ctx),
      claims: reaper.expireDueClaims(this.ctx),
      idleFiles: files.releaseIdleFiles(this.ctx),
    }
  }
  nextDueAt = (): number | null => reaper.nextDueAt(this.ctx)
  /**
   * The workers whose leases do not expire for now, asked whenever one could: neither the reaper
   * nor a call that names such a lease expires it (src-main/redis/lease-hold.ts). One source at a
   * time; returns the function that stops it.
   */
  spareLeases(spared: () => reaper.SparedWorkers): () => void {
    this.ctx.sparedWorkers = spared
    return () => {
      if (this.ctx.sparedWorkers === spared) this.ctx.sparedWorkers = () => null
    }
  }
  /**
   * Tells `listener`, inside the expiry's transaction, of each worker a lease of which expired for
   * its silence (`no_heartbeat`): a worker that stopped (a process paused, a machine cut off) may
   * still have a claim waiting here, which must not be handed its lost job, or any other, while it
   * is silent (dispatch.ts). One listener at a time; returns the function that stops it.
   */
  onWorkerSilent(listener: (workerId: string) => void): () => void {
    this.ctx.workerFellSilent = listener
    return () => {
      if (this.ctx.workerFellSilent === listener) this.ctx.workerFellSilent = null
    }
  }
  /** The ACTIVE leases of these workers last their TTL and grace from now (their silence counted from now); how many were renewed. */
  renewLeasesOf = (workerIds: ReadonlySet<string>): number => reaper.renewLeasesOf(this.ctx, workerIds)
  /** Records a remote worker over Redis the host heard from: a host that starts while Redis does not answer spares its leases. */
  recordRedisWorker = (workerId: string): void => reaper.recordRedisWorker(this.ctx, workerId)
  /** The recorded remote workers over Redis that hold a lease now (the others are forgotten). */
  redisWorkersHoldingLeases = (): string[] => reaper.redisWorkersHoldingLeases(this.ctx)
  /**
   * The first moment after `after` (now, unless given) that a QUEUED job's backoff ends or a
   * delayed job's `run_at` comes, or null (paused queues left out). One no later than now is a
   * job that became eligible since `after`.
   */
  nextEligibleAt = (after = this.ctx.clock.now()): number | null => nextEligibleAt(this.ctx, after)
  /** A local worker process exited: its leases expire now, not after their TTL. */
  expireLeasesOfWorker = (workerId: string): number => reaper.expireLeasesOfWorker(this.ctx, workerId)
  /** The pool is launching a local worker: remembered so that the next start expires its leases (see below). */
  recordLocalWorker = (workerId: string): void => reaper.recordLocalWorker(this.ctx, workerId)
  /** At a start: the leases of the local workers of the host before, which died with it, expire now. */
  expireLeasesOfLastHostsLocalWorkers = (): number => reaper.expireLeasesOfLastHostsLocalWorkers(this.ctx)
  /** On a database restored from a backup, the event ids and stream message ids move past those given after the copy (store/counters.ts). */
  goPastRestoredBackup = (): RestoredBackup | null => this.ctx.counters.goPastRestoredBackup(this.ctx.clock.now())
  /** Leases granted to a claim whose worker was gone before it heard of them: they expire now, not after their TTL. */
  handBackLeases = (workerId: string, leaseIds: readonly string[]): number => reaper.handBackLeases(this.ctx, workerId, leaseIds)
  /** The jobs each worker holds an ACTIVE lease on. */
  activeLeasesByWorker = (): Map<string, string[]> => {
    const byWorker = new Map<string, string[]>()
    for (const lease of activeLeases(this.ctx)) byWorker.set(lease.worker_id, [...(byWorker.get(lease.worker_id) ?? []), lease.job_id])
    return byWorker
  }

  /** This database's id, made at the first call and kept: how this host is known to hosts that share its Redis. */
  databaseId = (): string => databaseId(this.ctx)

  // Retention (docs/retention.md): each call one short transaction of its own, outside any group
  /**
   * One step of retention's sweep: deletes up to `limit` jobs that finished before `cutoff`, and
   * all that is theirs; says how many, and whether the sweep's pass is over.
   */
  pruneFinishedJobs = (cutoff: number, limit?: number): prune.PruneStep => prune.pruneFinishedJobs(this.ctx, this.retentionSweep, cutoff, limit)
  /** Deletes up to `limit` events that name no job and are older than `cutoff`, the oldest first; returns how many. */
  pruneJoblessEvents = (cutoff: number, limit: number): number => prune.pruneJoblessEvents(this.ctx, cutoff, limit)
  /** One step of retention for schedule runs that hold no job (skipped firings, pruned jobs' runs) older than `cutoff`; returns how many it deleted. */
  pruneScheduleRuns = (cutoff: number, limit: number): number => prune.pruneScheduleRuns(this.ctx, cutoff, limit)
  /** One step of retention for the file-gate rows of owners without a job (ended leases, lapsed handovers, refused acquires, answered blocker reports) older than `cutoff`; returns how many it deleted. */
  pruneJoblessFiles = (cutoff: number, limit: number): number => prune.pruneJoblessFiles(this.ctx, cutoff, limit)
  /** Deletes these finished jobs and all that is theirs, leaving any that something live needs; returns the ids deleted. */
  deleteFinishedJobs = (jobIds: readonly string[]): string[] => prune.deleteFinishedJobs(this.ctx, jobIds)
  /** One step of the statistics' own retention at the clock's now; 0 when nothing is left to do. */
  pruneStats = (): number => pruneStatsStep(this.ctx, this.ctx.clock.now())
  /** Gives up to `maxPages` surplus free pages back to the file system; returns how many. */
  returnFreePages = (maxPages: number): number => storage.returnFreePages(this.ctx, maxPages)
  storage = (): storage.StorageFigures => storage.storageFigures(this.ctx)
  /** Copies the WAL into the database file as far as it can without waiting (after each retention step). */
  checkpoint = (): void => storage.checkpointWal(this.ctx)

  // Capacity and stats
  getCapacity = (): CapacityFigures => this.capacity.figures()
  setCapacity = (change: CapacityChange): CapacityFigures => capacityVerbs.setCapacity(this.ctx, this.capacity, change)
  /** The host's measured busy rating; true when the usable units grew with no event to offer waiting claims the queue. */
  reportMeasuredBusy = (rating: number): boolean => this.capacity.reportMeasuredBusy(rating)
  snapshot = (): stats.Snapshot => stats.snapshot(this.ctx, this.capacity)
  /** Writes one sample of the gauges (the host's stats timer). */
  sampleStats = (): stats.StatsSample => sampleStats(this.ctx, this.capacity)
  timeseries = (metric: stats.Metric, bucket: stats.Bucket, range: stats.Range): stats.TimeseriesPoint[] => stats.timeseries(this.ctx, metric, bucket, range)
  /** When the stats history starts (first sample or event), or null: the time series know no earlier time. */
  seriesStart = (): number | null => stats.seriesStart(this.ctx)
}
