import type { Engine } from './engine'
import type { LeaseDecision } from './engine/leases'
import type { WorkerFilter } from './engine/pick'

/** Events after which a waiting claim may now succeed: work arrived, or capacity came back. */
const WAKE_EVENTS = new Set([
  'JOB_SUBMITTED',
  'JOB_REQUEUED',
  'JOB_CLAIM_EXPIRED',
  'JOB_DONE',
  'JOB_FAILED',
  'JOB_CANCELED',
  'JOB_TIMEOUT',
  'LEASE_EXPIRED',
  'CAPACITY_CHANGED',
  'BUSY_MEASURED',
])

interface Waiter {
  filter: WorkerFilter
  ttlS: number | undefined
  resolve(decision: LeaseDecision): void
  timer: NodeJS.Timeout
  settled: boolean
}

/**
 * Long-poll claims (dialect 003, and the local workers' IPC). A claim that cannot be leased
 * now waits; the engine's after-commit events wake the waiters, oldest first, so a submit
 * reaches a waiting worker at once — the database is never polled in a loop.
 */
export class ClaimWaiters {
  private waiting: Waiter[] = []
  /** A wake pass is running; a commit during it (its own grants) asks for one more pass. */
  private waking = false
  private wakeAgain = false
  /** A waiter was granted since the last {@link takeWoken}. */
  private woken = false
  /** Wakes the waiters when the next requeued job's backoff ends: no event marks that moment. */
  private eligibleTimer: NodeJS.Timeout | null = null
  private readonly unsubscribe: () => void

  constructor(private readonly engine: Engine) {
    this.unsubscribe = engine.onCommit((events) => {
      if (events.some((event) => WAKE_EVENTS.has(event.event_type))) this.wakeNow()
    })
  }

  get size(): number {
    return this.waiting.length
  }

  /**
   * Claims at once if a job can be leased; otherwise waits up to `maxWaitMs` for one. Resolves
   * with the last denial when the wait ends, the signal aborts (client gone), or {@link close}.
   */
  claim(filter: WorkerFilter, options: { maxWaitMs: number; ttlS?: number; signal?: AbortSignal }): Promise<LeaseDecision> {
    const first = this.engine.claimAndLease(filter, options.ttlS)
    if (first.granted || options.maxWaitMs <= 0 || options.signal?.aborted) return Promise.resolve(first)
    return new Promise((resolve) => {
      const waiter: Waiter = {
        filter,
        ttlS: options.ttlS,
        settled: false,
        resolve: (decision) => {
          if (waiter.settled) return
          waiter.settled = true
          clearTimeout(waiter.timer)
          options.signal?.removeEventListener('abort', onAbort)
          this.waiting = this.waiting.filter((w) => w !== waiter)
          resolve(decision)
        },
        timer: setTimeout(() => waiter.resolve(first), options.maxWaitMs),
      }
      const onAbort = () => waiter.resolve(first)
      options.signal?.addEventListener('abort', onAbort, { once: true })
      this.waiting.push(waiter)
      this.armEligibleTimer()
    })
  }

  /**
   * Whether a waiting claim was granted since the last call. The HTTP server asks after each
   * request, and lets the woken claims be answered before that request's own answer.
   */
  takeWoken(): boolean {
    const woken = this.woken
    this.woken = false
    return woken
  }

  /** Ends every wait (the host is stopping): each waiter gets a plain "nothing claimed". */
  close(): void {
    this.unsubscribe()
    if (this.eligibleTimer) clearTimeout(this.eligibleTimer)
    for (const waiter of [...this.waiting]) {
      waiter.resolve({ granted: false, reason: 'The host is stopping', retry_after_ms: this.engine.config.denyRetryAfterMs })
    }
  }

  /**
   * Right after the commit that made work or capacity available, before its caller goes on: a
   * waiting claim is granted before the submit that woke it is even answered, so the worker's
   * answer is the first one written. One pass per commit, however many events it had.
   */
  private wakeNow(): void {
    if (this.waiting.length === 0) return
    if (this.waking) {
      this.wakeAgain = true
      return
    }
    this.waking = true
    try {
      do {
        this.wakeAgain = false
        this.wake()
      } while (this.wakeAgain)
    } finally {
      this.waking = false
    }
  }

  /** Offers the queue to each waiter, oldest first. */
  private wake(): void {
    for (const waiter of [...this.waiting]) {
      if (waiter.settled) continue
      let decision: LeaseDecision
      try {
        decision = this.engine.claimAndLease(waiter.filter, waiter.ttlS)
      } catch {
        continue // e.g. the database is closing; the waiter's own timer ends its wait
      }
      if (decision.granted) {
        waiter.resolve(decision)
        this.woken = true
      }
    }
    this.armEligibleTimer()
  }

  private armEligibleTimer(): void {
    if (this.eligibleTimer) clearTimeout(this.eligibleTimer)
    this.eligibleTimer = null
    if (this.waiting.length === 0) return
    let at: number | null
    try {
      at = this.engine.nextEligibleAt()
    } catch {
      return // the database is closing
    }
    if (at === null) return
    const delay = Math.max(0, at - this.engine.ctx.clock.now())
    this.eligibleTimer = setTimeout(() => {
      this.eligibleTimer = null
      this.wakeNow()
    }, delay + 1)
  }
}
