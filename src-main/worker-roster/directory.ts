import type { Engine } from '../engine'

/** What the dashboard shows of a worker (GET /api/workers). */
export interface WorkerInfo {
  worker_id: string
  /** local: the host's pool; external: over HTTP; redis: on another machine, over Redis only (docs/redis.md). */
  kind: 'local' | 'external' | 'redis'
  /** Local workers: the process id. */
  pid: number | null
  /**
   * Local: starting, ready (idle), busy (ready and holding a lease) or draining. External:
   * active, or busy while it holds a lease.
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
export class WorkerDirectory {
  private readonly workers = new Map<string, WorkerInfo>()

  constructor(private readonly now: () => number) {}

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
  }

  /** Every known worker with the jobs it holds leases on now; one that holds any is busy. */
  list(engine: Engine): WorkerInfo[] {
    const leases = engine.activeLeasesByWorker()
    return [...this.workers.values()].map((w) => {
      const jobs = leases.get(w.worker_id) ?? []
      return { ...w, state: workingState(w.state, jobs.length), current_job_ids: jobs }
    })
  }
}

/** A worker that may take work (ready, active) and holds a lease is busy; starting and draining stay as they are. */
const workingState = (state: string, leases: number): string => (leases > 0 && (state === 'ready' || state === 'active') ? 'busy' : state)
