import type { Engine, WaitingJobNeeds, Walk, WorkersAtHand } from '../engine'
import { MAX_LONG_POLL_MS } from '../../src-shared/worker-exchange'

/**
 * A worker on another process or machine is heard from at least once per claim it waits on (at
 * most 30 s) while it runs: one not heard from for twice that is shown `silent` (it stopped, died,
 * or lost its way to the host), and one silent for an hour, holding nothing, is forgotten.
 */
export const SILENT_AFTER_MS = 2 * MAX_LONG_POLL_MS
export const FORGOTTEN_AFTER_MS = 60 * 60 * 1000

/** What a worker's claims take: the job types it runs and the queues it takes from (null or empty for any), and whether it has a GPU. */
export interface Takes {
  jobTypes: readonly string[] | null
  streams: readonly string[] | null
  /** It said it has a GPU: it takes jobs with `constraints.gpu_required`. */
  gpu: boolean
}

/** What the dashboard shows of a worker (GET /api/workers). */
export interface WorkerInfo {
  worker_id: string
  /** local: the host's pool; external: over HTTP; redis: on another machine, over Redis only (docs/redis.md). */
  kind: 'local' | 'external' | 'redis'
  /** Local workers: the process id. */
  pid: number | null
  /**
   * Local: starting, ready (idle), busy (ready and holding a lease) or draining. External and
   * redis: active, busy while it holds a lease, or silent ({@link SILENT_AFTER_MS}).
   */
  state: string
  current_job_ids: string[]
  last_seen_at: number
  started_at: number
  restarts: number
}

/**
 * The workers the host knows: local ones from the pool, external ones from their calls to
 * /internal/worker. Kept in memory — a worker is a process, not a record; the leases they hold
 * are in SQLite.
 */
export class WorkerDirectory implements WorkersAtHand {
  private readonly workers = new Map<string, WorkerInfo>()
  /** What each worker's last claim named: its job types and its queues; absent (or null) while it has named none: it may take any. */
  private readonly takes = new Map<string, Takes>()

  /** When a worker of the pull or queue API last asked for work: they are not listed, and take every queue. */
  private anyQueueAskedAt = -Infinity
  /** When one of them that has a GPU last asked. */
  private gpuAskedAt = -Infinity
  /** When one of them that has none last asked. */
  private gpuLessAskedAt = -Infinity

  constructor(private readonly now: () => number) {}

  /**
   * A worker of the pull or queue API asked for work. Those workers are not listed (they name no
   * queue, and a pull is one request), but they take jobs of every queue and type: while one has
   * asked lately, no job is said to be of a queue or type nobody takes, nor, if it has a GPU, a
   * job needing one.
   */
  askedForAnyQueue({ gpu }: { gpu: boolean }): void {
    const now = this.now()
    this.anyQueueAskedAt = now
    if (gpu) this.gpuAskedAt = now
    else this.gpuLessAskedAt = now
  }

  /** An external worker made a call. */
  seen(workerId: string): void {
    if (!this.touch(workerId)) this.update(workerId, { kind: 'external', state: 'active' })
  }

  /**
   * A known worker said something (a claim, a heartbeat, a notice): it was alive just now.
   * False for a worker this directory does not know (a local one that has already exited).
   */
  touch(workerId: string): boolean {
    const known = this.workers.get(workerId)
    if (known) known.last_seen_at = this.now()
    return known !== undefined
  }

  update(workerId: string, changes: Partial<Omit<WorkerInfo, 'worker_id'>>): void {
    const now = this.now()
    const known = this.workers.get(workerId) ?? {
      worker_id: workerId,
      kind: 'external' as const,
      pid: null,
      state: 'starting',
      current_job_ids: [],
      last_seen_at: now,
      started_at: now,
      restarts: 0,
    }
    this.workers.set(workerId, { ...known, ...changes, last_seen_at: now })
  }

  forget(workerId: string): void {
    this.workers.delete(workerId)
    this.takes.delete(workerId)
  }

  /** A worker claimed work naming the job types it runs and the queues it takes (null: any). Told by dispatch on every claim. */
  claims(workerId: string, takes: Takes): void {
    if (this.workers.has(workerId)) this.takes.set(workerId, takes)
  }

  /**
   * What keeps every worker at hand from taking this job: its queue, which none of them takes,
   * its type, which none of those that take the queue runs, or its need of a GPU, which none of
   * those that take both has. Each worker that still works (not silent) has claimed naming them;
   * one that has not claimed yet, or names none, may take any (and may have a GPU). Null when
   * some worker may take it, and with no worker at all: the job then waits for any worker, as
   * every job does.
   */
  nobodyTakes(job: WaitingJobNeeds): 'queue' | 'job_type' | 'gpu' | null {
    const lately = this.lately()
    // A worker of the pull or queue API takes every queue and type: all it may lack is a GPU.
    const anyQueue = lately(this.anyQueueAskedAt)
    if (anyQueue && (!job.gpu_required || lately(this.gpuAskedAt))) return null
    let working = anyQueue ? 1 : 0
    let queueTaken = anyQueue
    let typeRun = anyQueue
    for (const takes of this.workingTakes(lately)) {
      working += 1
      if (!takesQueue(takes, job.queue)) continue
      queueTaken = true
      if (!runsType(takes, job.job_type)) continue
      typeRun = true
      if (!job.gpu_required || takes?.gpu !== false) return null
    }
    return working === 0 ? null : !queueTaken ? 'queue' : !typeRun ? 'job_type' : 'gpu'
  }

  /**
   * How the workers at hand that take this job walk its queue, each walk once, the ones that
   * skip the most first. A worker known to have no GPU (its claims, or its pull or queue API
   * requests, say so) skips the jobs that need one; one whose claims name job types skips the
   * other types. One that has not claimed yet may take anything: it skips nothing.
   */
  walks(job: WaitingJobNeeds): Walk[] {
    const lately = this.lately()
    const walks = new Map<string, Walk>()
    const add = (walk: Walk) => walks.set(JSON.stringify(walk), walk)
    // A worker of the pull or queue API takes every queue and type.
    if (lately(this.gpuLessAskedAt) && !job.gpu_required) add({ gpu: false, jobTypes: null })
    if (lately(this.gpuAskedAt)) add({ gpu: true, jobTypes: null })
    for (const takes of this.workingTakes(lately)) {
      if (!takesQueue(takes, job.queue) || !runsType(takes, job.job_type)) continue
      const gpu = takes?.gpu !== false
      if (job.gpu_required && !gpu) continue
      add({ gpu, jobTypes: takes?.jobTypes ? [...takes.jobTypes].sort() : null })
    }
    return [...walks.values()].sort((a, b) => skipped(b) - skipped(a))
  }

  /** Whether a moment is recent enough for a worker last heard from then to be at hand. */
  private lately(): (at: number) => boolean {
    const now = this.now()
    return (at) => now - at < SILENT_AFTER_MS
  }

  /** What each listed worker that still works (local, or heard from lately) takes: undefined while it has claimed nothing. */
  private *workingTakes(lately: (at: number) => boolean): Generator<Takes | undefined> {
    for (const w of this.workers.values()) {
      if (w.kind !== 'local' && !lately(w.last_seen_at)) continue
      yield this.takes.get(w.worker_id)
    }
  }

  /**
   * Every known worker with the jobs it holds leases on now; one that holds any is busy, and one
   * of another process not heard from lately is silent (or, after an hour, forgotten).
   */
  list(engine: Engine): WorkerInfo[] {
    const leases = engine.activeLeasesByWorker()
    const now = this.now()
    const listed: WorkerInfo[] = []
    for (const w of this.workers.values()) {
      const jobs = leases.get(w.worker_id) ?? []
      const quietMs = w.kind === 'local' || jobs.length > 0 ? 0 : now - w.last_seen_at
      if (quietMs >= FORGOTTEN_AFTER_MS) {
        this.forget(w.worker_id)
        continue
      }
      listed.push({ ...w, state: quietMs >= SILENT_AFTER_MS ? 'silent' : workingState(w.state, jobs.length), current_job_ids: jobs })
    }
    return listed
  }
}

/** Whether a worker's claims take this queue: they name it, or name none. */
const takesQueue = (takes: Takes | undefined, queue: string): boolean => !takes?.streams?.length || takes.streams.includes(queue)

/** Whether a worker's claims run this job type: they name it, or name none. */
const runsType = (takes: Takes | undefined, jobType: string): boolean => !takes?.jobTypes || takes.jobTypes.includes(jobType)

/** How much a walk skips, to order walks: no GPU counts for more than a list of job types, and a shorter list for more than a longer. */
const skipped = (walk: Walk): number => (walk.gpu ? 0 : 2) + (walk.jobTypes === null ? 0 : 1 + 1 / (1 + walk.jobTypes.length))

/** A worker that may take work (ready, active) and holds a lease is busy; starting and draining stay as they are. */
const workingState = (state: string, leases: number): string => (leases > 0 && (state === 'ready' || state === 'active') ? 'busy' : state)
