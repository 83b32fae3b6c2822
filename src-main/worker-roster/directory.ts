import { type Engine, type NobodyTakes, type WaitingJobNeeds, type Walk, WHOLE_LINE, type WorkersAtHand } from '../engine'
import { MAX_LONG_POLL_MS } from '../../src-shared/worker-exchange'

/**
 * A worker on another process or machine is heard from at least once per claim it waits on (at
 * most 30 s) while it runs: one not heard from for twice that is shown `silent` (it stopped, died,
 * or lost its way to the host), and one silent for an hour, holding nothing, is forgotten.
 */
export const SILENT_AFTER_MS = 2 * MAX_LONG_POLL_MS
export const FORGOTTEN_AFTER_MS = 60 * 60 * 1000

/**
 * What a worker's requests for work take: the job types it runs and the queues it takes from
 * (null or empty for any), whether it has a GPU, and — the pull and queue APIs' filters — one
 * add-on's jobs only and no job above some units (absent or null: any).
 */
export interface Takes {
  jobTypes: readonly string[] | null
  streams: readonly string[] | null
  /** It said it has a GPU: it takes jobs with `constraints.gpu_required`. */
  gpu: boolean
  /** Only this add-on's jobs (the queue API's `addon_id`). */
  addonId?: string | null
  /** No job costing more units (the pull API's `max_units`, the queue API's `max_cost_units`). */
  maxUnits?: number | null
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

/** Fewer askers than this are never pruned: a map of a few hundred entries costs nothing to keep. */
const ASKERS_PRUNED_FROM = 256

/**
 * The workers the host knows: local ones from the pool, external ones from their calls to
 * /internal/worker. Kept in memory — a worker is a process, not a record; the leases they hold
 * are in SQLite.
 */
export class WorkerDirectory implements WorkersAtHand {
  private readonly workers = new Map<string, WorkerInfo>()
  /** What each worker's last claim named: its job types and its queues; absent (or null) while it has named none: it may take any. */
  private readonly takes = new Map<string, Takes>()
  /**
   * The workers of the pull and queue APIs that asked for work, with what their last request
   * took and when. They are not listed (they name no queue, and a pull is one request); those
   * not heard from lately are dropped as the map grows.
   */
  private readonly askers = new Map<string, { takes: Takes; at: number }>()
  /** The size at which {@link askers} is next pruned. */
  private pruneAskersAt = ASKERS_PRUNED_FROM

  constructor(private readonly now: () => number) {}

  /**
   * A worker of the pull or queue API asked for work, taking what `takes` says (every queue: those
   * APIs name none). While it asks, the jobs it would take are not said to be taken by no one,
   * and their lines are walked as it walks them.
   */
  askedForWork(workerId: string, takes: Omit<Takes, 'streams'>): void {
    this.askers.delete(workerId) // to the end of the map's order: the oldest askers come first
    this.askers.set(workerId, { takes: { ...takes, streams: null }, at: this.now() })
    if (this.askers.size < this.pruneAskersAt) return
    const lately = this.lately()
    for (const [id, asker] of this.askers) {
      if (lately(asker.at)) break
      this.askers.delete(id)
    }
    this.pruneAskersAt = Math.max(ASKERS_PRUNED_FROM, 2 * this.askers.size)
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
   * What keeps every worker at hand from taking this job: the last of its queue, its type, its
   * add-on, its size and its need of a GPU that some worker at hand passes (a worker that takes
   * the job's queue but runs other types: `job_type`). Each worker that still works (not silent)
   * has asked for work saying what it takes; one that has not claimed yet, or names nothing, may
   * take any. Null when some worker may take it, and with no worker at all: the job then waits
   * for any worker, as every job does.
   */
  nobodyTakes(job: WaitingJobNeeds): NobodyTakes | null {
    let working = 0
    let passed = 0
    for (const takes of this.workingTakes()) {
      working += 1
      const stops = stopsAt(takes, job)
      if (stops === TAKES_IT) return null
      passed = Math.max(passed, stops)
    }
    return working === 0 ? null : MATCHED_IN_ORDER[passed]!
  }

  /**
   * How the workers at hand that take this job walk its queue, each walk once, the ones that
   * skip the most first. A worker known to have no GPU skips the jobs that need one; one whose
   * requests name job types, an add-on or a limit of units skips the jobs they rule out. One that
   * has not claimed yet may take anything: it skips nothing. A job that only a GPU keeps from
   * every worker at hand is placed in the lines of those that would take it with one, as they
   * would walk with a GPU: skipping the types, add-ons and sizes they skip.
   */
  walks(job: WaitingJobNeeds): Walk[] {
    const walks = new Map<string, Walk>()
    const working = [...this.workingTakes()]
    for (const takes of working) {
      if (stopsAt(takes, job) !== TAKES_IT) continue
      const walk = walkOf(takes)
      walks.set(JSON.stringify(walk), walk)
    }
    if (walks.size === 0 && job.gpu_required) {
      for (const takes of working) {
        if (stopsAt(takes, job) !== GPU_STOP) continue
        const walk = { ...walkOf(takes), gpu: true }
        walks.set(JSON.stringify(walk), walk)
      }
    }
    return [...walks.values()].sort(skipsMoreFirst)
  }

  /** Whether a moment is recent enough for a worker last heard from then to be at hand. */
  private lately(): (at: number) => boolean {
    const now = this.now()
    return (at) => now - at < SILENT_AFTER_MS
  }

  /** What each worker that still works takes (a listed one: local, or heard from lately; an asker of the pull or queue API that asked lately): undefined while it has claimed nothing. */
  private *workingTakes(): Generator<Takes | undefined> {
    const lately = this.lately()
    for (const w of this.workers.values()) {
      if (w.kind !== 'local' && !lately(w.last_seen_at)) continue
      yield this.takes.get(w.worker_id)
    }
    for (const asker of this.askers.values()) if (lately(asker.at)) yield asker.takes
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

/** What a worker's request is matched against, in order: the first it fails is where it stops. */
const MATCHED_IN_ORDER: readonly NobodyTakes[] = ['queue', 'job_type', 'addon', 'units', 'gpu']
/** {@link stopsAt} of a worker that takes the job: it passes every one. */
const TAKES_IT = MATCHED_IN_ORDER.length
/** {@link stopsAt} of a worker that would take the job but for its need of a GPU. */
const GPU_STOP = MATCHED_IN_ORDER.indexOf('gpu')

/** How far this worker's requests match the job: the index in {@link MATCHED_IN_ORDER} of the first that rules it out, or {@link TAKES_IT}. */
function stopsAt(takes: Takes | undefined, job: WaitingJobNeeds): number {
  if (takes === undefined) return TAKES_IT // it has claimed nothing yet: it may take anything
  const passes = [
    !takes.streams?.length || takes.streams.includes(job.queue),
    !takes.jobTypes || takes.jobTypes.includes(job.job_type),
    takes.addonId == null || takes.addonId === job.addon_id,
    takes.maxUnits == null || job.cost_units <= takes.maxUnits,
    !job.gpu_required || takes.gpu,
  ]
  const fails = passes.indexOf(false)
  return fails < 0 ? TAKES_IT : fails
}

/** The line as this worker walks it (one that has not claimed yet walks all of it). */
function walkOf(takes: Takes | undefined): Walk {
  if (takes === undefined) return WHOLE_LINE
  return { gpu: takes.gpu, jobTypes: takes.jobTypes ? [...takes.jobTypes].sort() : null, addon: takes.addonId ?? null, maxUnits: takes.maxUnits ?? null }
}

/**
 * The order of walks, those that skip the most first: no GPU before a GPU, then one add-on's
 * jobs before any, then some job types before every type (a shorter list first), then a limit of
 * units before none (a lower one first).
 */
function skipsMoreFirst(a: Walk, b: Walk): number {
  const types = (walk: Walk) => walk.jobTypes?.length ?? Infinity
  const units = (walk: Walk) => walk.maxUnits ?? Infinity
  return Number(a.gpu) - Number(b.gpu) || Number(b.addon !== null) - Number(a.addon !== null) || types(a) - types(b) || units(a) - units(b)
}

/** A worker that may take work (ready, active) and holds a lease is busy; starting and draining stay as they are. */
const workingState = (state: string, leases: number): string => (leases > 0 && (state === 'ready' || state === 'active') ? 'busy' : state)
