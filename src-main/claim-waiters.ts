import type { Engine, EngineEvent } from './engine'
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
  /** Settles with the grant, or the last denial when the wait ends. */
  answer: Promise<LeaseDecision>
  resolve(decision: LeaseDecision): void
  timer: NodeJS.Timeout
  settled: boolean
}

/** A lease granted to a waiter, answered once the commit that holds it is durable. */
interface Grant {
  waiter: Waiter
  decision: LeaseDecision
}

const isWakeEvent = (event: EngineEvent): boolean => WAKE_EVENTS.has(event.event_type)

/**
 * Long-poll claims (dialect 003, and the local workers' IPC). A claim that cannot be leased
 * now waits. A commit that makes work or capacity available leases it to the waiters, oldest
 * first, inside that same commit: one transaction writes the submit and the grant, and the
 * worker is answered as soon as it is durable, before the submitter. The database is never
 * polled in a loop.
 */
export class ClaimWaiters {
  private waiting: Waiter[] = []
  /** The grants made inside each commit in progress, keyed by its events (see CommitListener). */
  private readonly grantsByCommit = new WeakMap<readonly EngineEvent[], Grant[]>()
  /** A waiter was granted since the last {@link takeWoken}. */
  private woken = false
  /** Wakes the waiters when the next requeued job's backoff ends: no event marks that moment. */
  private eligibleTimer: NodeJS.Timeout | null = null
  private readonly unsubscribe: (() => void)[]

  constructor(private readonly engine: Engine) {
    this.unsubscribe = [
      engine.beforeCommit((events) => {
        if (this.waiting.length === 0 || !events.some(isWakeEvent)) return
        // Inside the committing transaction; a grant that fails undoes only itself.
        const grants = this.offer((waiter) => engine.ctx.attempt(() => engine.claimAndLease(waiter.filter, waiter.ttlS)))
        if (grants.length > 0) this.grantsByCommit.set(events, grants)
      }),
      engine.onCommit((events) => {
        const grants = this.grantsByCommit.get(events) ?? []
        this.grantsByCommit.delete(events)
        for (const { waiter, decision } of grants) this.answer(waiter, decision)
        // A requeue may have set a later eligible time for the waiters still waiting.
        if (grants.length > 0 || events.some(isWakeEvent)) this.armEligibleTimer()
      }),
    ]
  }

  get size(): number {
    return this.waiting.length
  }

  /**
   * Claims at once if a job can be leased; otherwise waits up to `maxWaitMs` for one. Resolves
   * with the last denial when the wait ends, the signal aborts (client gone), or {@link close}.
   * The first try runs in the engine's commit group, and a denied claim starts waiting inside
   * that same operation: work that another operation of the group makes available is offered
   * to it before the group commits, never missed between the try and the wait.
   */
  async claim(filter: WorkerFilter, options: { maxWaitMs: number; ttlS?: number; signal?: AbortSignal }): Promise<LeaseDecision> {
    let waiter: Waiter | null = null
    let first: LeaseDecision
    try {
      first = await this.engine.run(() => {
        const decision = this.engine.claimAndLease(filter, options.ttlS)
        if (!decision.granted && options.maxWaitMs > 0 && !options.signal?.aborted) waiter = this.wait(filter, decision, options)
        return decision
      })
    } catch (error) {
      ;(waiter as Waiter | null)?.resolve({ granted: false, reason: 'The claim failed', retry_after_ms: this.engine.config.denyRetryAfterMs })
      throw error
    }
    const registered = waiter as Waiter | null
    return registered ? registered.answer : first
  }

  private wait(filter: WorkerFilter, denial: LeaseDecision, options: { maxWaitMs: number; ttlS?: number; signal?: AbortSignal }): Waiter {
    let settle!: (decision: LeaseDecision) => void
    const answer = new Promise<LeaseDecision>((resolve) => (settle = resolve))
    const onAbort = () => waiter.resolve(denial)
    const waiter: Waiter = {
      filter,
      ttlS: options.ttlS,
      settled: false,
      answer,
      resolve: (decision) => {
        if (waiter.settled) return
        waiter.settled = true
        clearTimeout(waiter.timer)
        options.signal?.removeEventListener('abort', onAbort)
        this.waiting = this.waiting.filter((w) => w !== waiter)
        settle(decision)
      },
      timer: setTimeout(() => waiter.resolve(denial), options.maxWaitMs),
    }
    options.signal?.addEventListener('abort', onAbort, { once: true })
    this.waiting.push(waiter)
    this.armEligibleTimer()
    return waiter
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
    for (const unsubscribe of this.unsubscribe) unsubscribe()
    if (this.eligibleTimer) clearTimeout(this.eligibleTimer)
    for (const waiter of [...this.waiting]) {
      waiter.resolve({ granted: false, reason: 'The host is stopping', retry_after_ms: this.engine.config.denyRetryAfterMs })
    }
  }

  /**
   * Offers the queue to each waiter, oldest first, and takes the granted ones off the list: they
   * are answered by the caller. (Should their commit fail, their own timer ends their wait.)
   */
  private offer(claim: (waiter: Waiter) => LeaseDecision | undefined): Grant[] {
    const grants: Grant[] = []
    for (const waiter of [...this.waiting]) {
      if (waiter.settled) continue
      const decision = claim(waiter)
      if (!decision?.granted) continue
      grants.push({ waiter, decision })
      this.waiting = this.waiting.filter((w) => w !== waiter)
    }
    return grants
  }

  private answer(waiter: Waiter, decision: LeaseDecision): void {
    waiter.resolve(decision)
    this.woken = true
  }

  /** A requeued job's backoff ended: each grant is its own transaction, answered after it commits. */
  private wakeForEligible(): void {
    const grants = this.offer((waiter) => {
      try {
        return this.engine.claimAndLease(waiter.filter, waiter.ttlS)
      } catch {
        return undefined // e.g. the database is closing; the waiter's own timer ends its wait
      }
    })
    for (const { waiter, decision } of grants) this.answer(waiter, decision)
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
      this.wakeForEligible()
    }, delay + 1)
  }
}
