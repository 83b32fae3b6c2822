import type { Database } from 'better-sqlite3'
import type { AttemptRow, EventRow, JobRow, LeaseRow } from '../db/schema'
import { CapacityStore, type CapacityChange, type CapacitySettings } from './capacity-store'
import type { CapacityFigures } from './capacity'
import type { Clock } from './clock'
import { type CommitListener, DEFAULT_ENGINE_CONFIG, EngineContext, type EngineConfig, type EventListener } from './context'
import * as batch from './batch'
import * as blockers from './blockers'
import * as bulk from './bulk'
import * as files from './files'
import * as jobs from './jobs'
import * as leases from './leases'
import { RecentCounts } from './recent-counts'
import { listJobs, type JobListQuery, type JobPage } from './list'
import { nextEligibleAt, type WorkerFilter } from './pick'
import * as queues from './queues'
import { retryJob } from './retry'
import { runNow } from './scheduled'
import * as prune from './prune'
import * as reaper from './reaper'
import * as schedules from './schedules'
import * as stats from './stats'
import { pruneStatsStep } from './stats-retention'
import * as storage from './storage'
import type { JobState } from './states'
import { readSituation, WAITING_STATES, waitingReason } from './waiting'

export type { CommitListener, EngineConfig, EngineEvent, EventListener } from './context'
export { DEFAULT_ENGINE_CONFIG } from './context'
export { EngineError } from './errors'
export type { Firing, JobTemplate, Overlap, Schedule, ScheduleChange, ScheduleInput, ScheduleOrigin, ScheduleRun } from './schedules'
export { MAX_BATCH_ITEMS, MAX_CLAIM_JOBS, type ClaimBatch, type ExchangeAnswer, type ItemResult, type WorkerExchange } from './batch'
export { BULK_ACTIONS, BULK_STATES, type BulkAction, type BulkCursor, type BulkFilter, type BulkPlan, type BulkStep } from './bulk'
export type { CountedState, QueuePause, QueueSummary } from './queues'

export interface EngineOptions {
  db: Database
  clock: Clock
  config?: Partial<EngineConfig>
  /** Capacity settings used until an operator changes them (then the stored ones win). */
  capacity?: CapacitySettings
}

/**
 * The scheduler: every rule of CONTRACTS.md as one method per verb, each one SQLite transaction
 * that appends its events. It knows no HTTP, Electron or timers; dialects adapt its results,
 * and the host's timers call {@link Engine.reap} and {@link Engine.sampleStats}.
 */
export class Engine {
  readonly ctx: EngineContext
  readonly capacity: CapacityStore
  /** The finished and expired counts of the last 24 h, for the snapshot. */
  private readonly recent: RecentCounts

  constructor(options: EngineOptions) {
    this.ctx = new EngineContext(options.db, options.clock, { ...DEFAULT_ENGINE_CONFIG, ...options.config })
    this.capacity = new CapacityStore(this.ctx, options.capacity ?? { total_units: 100, busy_rating: null })
    this.recent = new RecentCounts(this.ctx)
    this.ctx.pausedQueues.load()
    this.ctx.activeLeases.load()
  }

  get config(): EngineConfig {
    return this.ctx.config
  }

  /** The database file ('' or ':memory:' in tests); its folder is the data dir a storage fault names. */
  get databaseFile(): string {
    return this.ctx.db.name
  }

  onEvent(listener: EventListener): () => void {
    return this.ctx.onEvent(listener)
  }

  /** Called once per commit with its events, after the event listeners (see EngineContext.onCommit). */
  onCommit(listener: CommitListener): () => void {
    return this.ctx.onCommit(listener)
  }

  /** Called just before each commit, inside its transaction (see EngineContext.beforeCommit). */
  beforeCommit(listener: CommitListener): () => void {
    return this.ctx.beforeCommit(listener)
  }

  /**
   * Group commit: runs `op` (one or more verbs) in the commit group of this event-loop turn and
   * settles once the group is durable. Transports use it for every operation they answer, so
   * that many operations share one commit; see EngineContext.runGrouped.
   */
  run<T>(op: () => T): Promise<T> {
    return this.ctx.runGrouped(op)
  }

  /** Transactions committed since the engine started: with {@link run}'s operations counted, how much groups gather. */
  get commits(): number {
    return this.ctx.commits
  }

  /** Commits the open group now, if any (before the database is closed). */
  flush(): void {
    this.ctx.flush()
  }

  // Jobs
  submit = (input: jobs.SubmitJob): jobs.SubmitResult => jobs.submit(this.ctx, input, this.capacity.totalUnits())
  getJob = (jobId: string): JobRow => jobs.getJob(this.ctx, jobId)
  listJobs = (query: JobListQuery): JobPage => listJobs(this.ctx, query)
  cancel = (jobId: string, reason?: string | null): JobRow => jobs.cancel(this.ctx, jobId, reason)
  updateStatus = (jobId: string, update: jobs.StatusUpdate): JobRow => jobs.updateStatus(this.ctx, jobId, update)
  jobEvents = (jobId: string): EventRow[] => jobs.jobEvents(this.ctx, jobId)
  /** Why each of these jobs waits (null for one that runs or has ended). For views, not hot paths. */
  waitingReasons = (rows: readonly JobRow[]): (string | null)[] => {
    // A page of running or finished jobs needs none of the situation's reads.
    if (!rows.some((row) => WAITING_STATES.has(row.state as JobState))) return rows.map(() => null)
    const situation = readSituation(this.ctx, this.capacity)
    return rows.map((row) => waitingReason(row, situation))
  }
  /** A job's attempts, first first. */
  attempts = (jobId: string): AttemptRow[] => {
    jobs.getJob(this.ctx, jobId)
    return this.ctx.all<AttemptRow>(
      `SELECT attempt_id AS id, job_id, id AS lease_id, worker_id, attempt AS number, granted_at AS started_at,
         released_at AS finished_at, release_status AS outcome, disposition, error
       FROM leases WHERE job_id = ? ORDER BY attempt`,
      jobId,
    )
  }
  /** The ACTIVE leases with their job's type, soonest expiry first. */
  activeLeases = (): (LeaseRow & { job_type: string })[] =>
    this.ctx.all<LeaseRow & { job_type: string }>(
      "SELECT leases.*, jobs.job_type FROM leases JOIN jobs ON jobs.id = leases.job_id WHERE leases.state = 'ACTIVE' ORDER BY leases.expires_at",
    )

  // Leases
  /** Dialect 001: dequeue and lease in one step; the job becomes LEASED. */
  requestLease = (filter: WorkerFilter, ttl_s?: number): leases.LeaseDecision =>
    leases.leaseNext(this.ctx, this.capacity, filter, { ttl_s, to: 'LEASED' })
  /** Dialect 003: claim = lease + attempt + token; the job becomes RUNNING. */
  claimAndLease = (filter: WorkerFilter, ttl_s?: number): leases.LeaseDecision =>
    leases.leaseNext(this.ctx, this.capacity, filter, { ttl_s, to: 'RUNNING' })
  /** Dialect 002: claim now, lease later. */
  claim = (filter: WorkerFilter, limit = 1): JobRow[] => leases.claimJobs(this.ctx, filter, limit)
  requestLeaseForJob = (request: leases.LeaseRequestForJob): leases.JobLeaseDecision =>
    leases.requestLeaseForJob(this.ctx, this.capacity, request)
  getLease = (leaseId: string) => leases.getLease(this.ctx, leaseId)
  heartbeat = (request: Parameters<typeof leases.heartbeat>[1]) => leases.heartbeat(this.ctx, request)
  heartbeatByToken = (request: Parameters<typeof leases.heartbeatByToken>[1]) => leases.heartbeatByToken(this.ctx, request)
  release = (request: leases.ReleaseRequest): leases.Released => leases.releaseLease(this.ctx, request)
  complete = (request: Parameters<typeof leases.completeAttempt>[1]) => leases.completeAttempt(this.ctx, request)
  fail = (request: Parameters<typeof leases.failAttempt>[1]) => leases.failAttempt(this.ctx, request)

  // Batches: each item answered as its one-job verb would answer it (see batch.ts)
  submitMany = (inputs: jobs.SubmitJob[]): batch.ItemResult<jobs.SubmitResult>[] => batch.submitMany(this.ctx, this.capacity, inputs)
  /** Dialect 003 claim of up to `maxJobs` jobs, stopping at the first denial. */
  claimBatch = (filter: WorkerFilter, maxJobs: number, ttl_s?: number): batch.ClaimBatch =>
    batch.claimBatch(this.ctx, this.capacity, filter, maxJobs, ttl_s)
  /** A worker's reports (heartbeats, completions, failures) and a claim for its free slots, in one call. */
  exchange = (request: batch.WorkerExchange): batch.ExchangeAnswer => batch.exchange(this.ctx, this.capacity, request)

  // Delayed jobs, paused queues, retries and bulk operations (docs/operations.md)
  /** Runs a delayed job now (409 `not_scheduled` unless it waits for its `run_at`). */
  runNow = (jobId: string, requestedBy: string | null = null): JobRow => runNow(this.ctx, jobId, requestedBy)
  /** A FAILED, TIMEOUT or CANCELED job back to QUEUED as a new run with a fresh attempt budget. */
  retry = (jobId: string, requestedBy: string | null = null): JobRow => retryJob(this.ctx, jobId, this.capacity.totalUnits(), requestedBy)
  pauseQueue = (queue: string, requestedBy: string | null = null): queues.QueuePause => queues.pauseQueue(this.ctx, queue, requestedBy)
  resumeQueue = (queue: string, requestedBy: string | null = null): queues.QueuePause => queues.resumeQueue(this.ctx, queue, requestedBy)
  /** Every queue with jobs other than DONE ones, or paused, with its counts by state. */
  listQueues = (): queues.QueueSummary[] => queues.listQueues(this.ctx)
  /** Checks and plans a bulk retry, cancel or purge; {@link bulkStep} then runs it step by step. */
  planBulk = (action: bulk.BulkAction, request: Parameters<typeof bulk.planBulk>[2]): bulk.BulkPlan => bulk.planBulk(this.ctx, action, request)
  /** One step of a bulk call, its own transaction: call it outside {@link run}, and let other work in between steps. */
  bulkStep = (plan: bulk.BulkPlan, cursor: bulk.BulkCursor): bulk.BulkStep => bulk.bulkStep(this.ctx, this.capacity, plan, cursor)

  // File leases and blockers (seed 004)
  acquireFile = (request: files.FileLeaseRequest): files.AcquireResult => files.acquireFile(this.ctx, request)
  heartbeatFile = (request: { file: string; owner_id: string }) => files.heartbeatFile(this.ctx, request)
  releaseFile = (request: { file: string; owner_id: string }) => files.releaseFile(this.ctx, request)
  fileRetryAt = (file: string, ownerId: string): number | null => files.fileRetryAt(this.ctx, file, ownerId)
  listFileLeases = (state: 'ACTIVE' | 'RELEASED' | 'REVOKED' | null = 'ACTIVE') => files.listFileLeases(this.ctx, state)
  listBlockers = (state: 'OPEN' | 'RESOLVED' | null = null) => blockers.listBlockers(this.ctx, state)
  getBlocker = (blockerId: string) => blockers.getBlocker(this.ctx, blockerId)
  resolveBlocker = (blockerId: string, answer: blockers.ResolveBlocker) => blockers.resolveBlocker(this.ctx, blockerId, answer)

  /** Records something about a worker that an operator should see (a handler that failed to load…). */
  recordWorkerEvent = (workerId: string, eventType: string, data: Record<string, unknown>): void =>
    this.ctx.transact(() => this.ctx.appendEvent('WORKER', workerId, null, eventType, data))

  // Recurring schedules (docs/schedules.md)
  createSchedule = (input: schedules.ScheduleInput): schedules.Schedule => schedules.createSchedule(this.ctx, this.capacity, input)
  updateSchedule = (name: string, change: schedules.ScheduleChange): schedules.Schedule =>
    schedules.updateSchedule(this.ctx, this.capacity, name, change)
  deleteSchedule = (name: string): schedules.Schedule => schedules.deleteSchedule(this.ctx, name)
  getSchedule = (name: string): schedules.Schedule => schedules.getSchedule(this.ctx, name)
  listSchedules = (): schedules.Schedule[] => schedules.listSchedules(this.ctx)
  /** Which schedule firing made each of these jobs (for the job views). */
  scheduleOrigins = (jobIds: readonly string[]): Map<string, schedules.ScheduleOrigin> => schedules.scheduleOrigins(this.ctx, jobIds)

  // Time-driven work
  /** Fires the schedules due now, each once (its latest due firing); the schedule timer calls it. */
  fireDueSchedules = (): schedules.Firing[] => schedules.fireDueSchedules(this.ctx, this.capacity)
  /** When the earliest enabled schedule fires next, or null. */
  nextScheduleFireAt = (): number | null => schedules.nextScheduleFireAt(this.ctx)
  /** Expires due leases and claims; returns how many of each. */
  reap = (): { leases: number; claims: number; idleFiles: number } => ({
    leases: reaper.expireDueLeases(this.ctx),
    claims: reaper.expireDueClaims(this.ctx),
    idleFiles: files.releaseIdleFiles(this.ctx),
  })
  nextDueAt = (): number | null => reaper.nextDueAt(this.ctx)
  /** When the next QUEUED job's backoff ends or a delayed job's `run_at` comes, or null (paused queues left out). */
  nextEligibleAt = (): number | null => nextEligibleAt(this.ctx, this.ctx.clock.now())
  /** A local worker process exited: its leases expire now, not after their TTL. */
  expireLeasesOfWorker = (workerId: string): number => reaper.expireLeasesOfWorker(this.ctx, workerId)
  /** The jobs each worker holds an ACTIVE lease on. */
  activeLeasesByWorker = (): Map<string, string[]> => {
    const byWorker = new Map<string, string[]>()
    for (const lease of this.activeLeases()) byWorker.set(lease.worker_id, [...(byWorker.get(lease.worker_id) ?? []), lease.job_id])
    return byWorker
  }

  // Retention (docs/retention.md): each call one short transaction of its own, outside any group
  /** Deletes up to `limit` jobs that finished before `cutoff`, and all that is theirs; returns how many. */
  pruneFinishedJobs = (cutoff: number, limit?: number): number => prune.pruneFinishedJobs(this.ctx, cutoff, limit)
  /** Deletes up to `limit` events that name no job and are older than `cutoff`, the oldest first; returns how many. */
  pruneJoblessEvents = (cutoff: number, limit: number): number => prune.pruneJoblessEvents(this.ctx, cutoff, limit)
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
  setCapacity = (change: CapacityChange): CapacityFigures => this.capacity.set(change)
  reportMeasuredBusy = (rating: number): void => this.capacity.reportMeasuredBusy(rating)
  snapshot = (): stats.Snapshot => stats.snapshot(this.ctx, this.capacity, this.recent)
  sampleStats = () => stats.sampleStats(this.ctx, this.capacity)
  timeseries = (metric: stats.Metric, bucket: stats.Bucket, range: stats.Range) => stats.timeseries(this.ctx, metric, bucket, range)
  /** When the stats history starts (first sample or event), or null: the time series know no earlier time. */
  seriesStart = (): number | null => stats.seriesStart(this.ctx)
}
