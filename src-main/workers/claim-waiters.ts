import { type Assignment, type Claims, type Denial, type Engine, type Event, type ExchangeAnswer, WAKE_EVENTS, type WorkerExchange, type WorkerFilter } from '../engine'

export interface ClaimOptions {
  maxWaitMs: number
  /** Jobs to take at most (a worker with several free slots); 1 unless said. */
  maxJobs?: number
  ttlS?: number
  signal?: AbortSignal
}

/**
 * For a claim that waits: called with its answer from inside the commit listener of the commit
 * that grants it — once that commit is durable, and before the claim's promise settles with
 * the same answer. A transport answers there at once (an HTTP response, a local worker's IPC
 * message) instead of one turn of promises and middleware later.
 */
export type OnAnswer<A> = (answer: A) => void

interface Waiter {
  /** Its place in the order of waiting: claims are served oldest first. */
  order: number
  filter: WorkerFilter
  maxJobs: number
  ttlS: number | undefined
  /** Answers the claim from the commit that grants it (see {@link OnAnswer}). */
  onGranted: ((claimed: Claims) => void) | undefined
  /** Settles with the grants, or with none and the last denial when the wait ends. */
  answer: Promise<Claims>
  resolve(claimed: Claims): void
  timer: NodeJS.Timeout
  settled: boolean
}

/** Leases granted to a waiter, answered once the commit that holds them is durable. */
interface Grant {
  waiter: Waiter
  claimed: Claims
}

/** A worker's exchange as the transports carry it: its reports, and a claim named by streams. */
export type WorkerExchangeRequest = Omit<WorkerExchange, 'claim'> & { claim?: { streams: string[]; max_jobs: number } }

const nothing = (denial: Claims['denial']): Claims => ({ granted: [], denial })

/** Work arrived or capacity came back (engine/events.ts decides which events say so). */
const isWakeEvent = (event: Event): boolean => WAKE_EVENTS.has(event.event_type)

/**
 * Long-poll claims (dialect 003, and the local workers' IPC). A claim that cannot be leased
 * now waits. A commit that makes work or capacity available leases it to the waiters, oldest
 * first, inside that same commit: one transaction writes the submit and the grant, and the
 * worker is answered as soon as it is durable, before the submitter. (A one-job submit that the
 * first waiter would take leases it itself, and its group commits at once: grants.ts
 * `grantOnSubmit`.) The database is never polled in a loop.
 */
export class ClaimWaiters {
  private waiting: Waiter[] = []
  /** Claims that have waited so far: the next one's {@link Waiter.order}. */
  private waited = 0
  /** Waiters leased a job in its submit, inside the transaction in progress: answered at its commit. */
  private leasedAtSubmit: Grant[] = []
  /** The grants made inside each commit in progress, keyed by its events (see CommitListener). */
  private readonly grantsByCommit = new WeakMap<readonly Event[], Grant[]>()
  /** A waiter was granted since the last {@link takeWoken}. */
  private woken = false
  /**
   * Wakes the waiters when the next requeued job's backoff ends or a delayed job's `run_at`
   * comes: no event marks that moment.
   */
  private eligibleTimer: NodeJS.Timeout | null = null
  /** The moment {@link eligibleTimer} is set for, on the engine's clock. */
  private eligibleAt: number | null = null
  private readonly unsubscribe: (() => void)[]

  constructor(private readonly engine: Engine) {
    this.unsubscribe = [
      engine.beforeCommit((events) => {
        const grants = this.leasedAtSubmit
        this.leasedAtSubmit = []
        if (this.waiting.length > 0 && events.some(isWakeEvent)) {
          // Inside the committing transaction; a grant that fails undoes only itself.
          grants.push(...this.offer((waiter) => engine.claimInCommit(waiter.filter, waiter.maxJobs, waiter.ttlS)))
        }
        if (grants.length > 0) this.grantsByCommit.set(events, grants)
      }),
      // A job submitted while claims wait may go to the first of them in its own submit.
      engine.serveWaitingClaims({ waiting: () => this.waiting, leased: (claim, claimed) => this.leased(claim as Waiter, claimed) }),
      engine.onCommit((events) => {
        const grants = this.grantsByCommit.get(events) ?? []
        this.grantsByCommit.delete(events)
        for (const { waiter, claimed } of grants) this.answer(waiter, claimed)
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
   */
  async claim(filter: WorkerFilter, options: ClaimOptions, onAnswer?: OnAnswer<Assignment>): Promise<Assignment | Denial> {
    const op = () => ({ claimed: this.engine.claimBatch(filter, 1, options.ttlS) })
    const early = onAnswer && ((answer: { claimed: Claims }) => onAnswer(answer.claimed.granted[0]!))
    const { claimed } = await this.claimAfter(filter, { ...options, maxJobs: 1 }, op, undefined, early)
    return claimed.granted[0] ?? claimed.denial!
  }

  /**
   * Runs `op` (which claims, and may report on other jobs first, as a worker's exchange does) as
   * one operation of the engine's commit group; if it leased nothing, waits up to `maxWaitMs`
   * for up to `maxJobs` jobs — unless `answerNow` says the answer is news the caller must have
   * at once. The wait starts inside that same operation: work that another operation of the
   * group makes available is offered to it before the group commits, never missed between the
   * try and the wait. A claim that waits and is granted is given to `onAnswer` from the commit
   * that grants it, as well as to the promise.
   */
  async claimAfter<R extends { claimed: Claims }>(
    filter: WorkerFilter,
    options: ClaimOptions,
    op: () => R,
    answerNow: (answer: R) => boolean = () => false,
    onAnswer?: OnAnswer<R>,
  ): Promise<R> {
    let waiter: Waiter | null = null
    let first: R
    try {
      first = await this.engine.run(() => {
        const answer = op()
        const waits = answer.claimed.granted.length === 0 && options.maxWaitMs > 0 && !options.signal?.aborted && !answerNow(answer)
        if (waits) waiter = this.wait(filter, answer.claimed.denial, options, onAnswer && ((claimed) => onAnswer({ ...answer, claimed })))
        return answer
      })
    } catch (error) {
      ;(waiter as Waiter | null)?.resolve(nothing(null))
      throw error
    }
    const registered = waiter as Waiter | null
    return registered ? { ...first, claimed: await registered.answer } : first
  }

  /**
   * A worker's exchange (dialect 003's /batch, the local workers' IPC `exchange`): its reports,
   * then a claim of up to `max_jobs` that waits up to `maxWaitMs` (already capped by the
   * transport) when nothing could be leased. A report the host refused (its lease was lost) is
   * answered at once, not held by the wait: the worker learns now that it must drop a result or
   * stop a handler, not when work next comes.
   */
  exchange(request: WorkerExchangeRequest, options: { maxWaitMs: number; signal?: AbortSignal }, onAnswer?: OnAnswer<ExchangeAnswer>): Promise<ExchangeAnswer> {
    const { claim, ...reports } = request
    return this.claimAfter(
      { worker_id: request.worker_id, queues: claim?.streams ?? [] },
      { maxJobs: claim?.max_jobs ?? 1, maxWaitMs: claim ? options.maxWaitMs : 0, signal: options.signal },
      () => this.engine.exchange({ ...reports, claim: claim && { filter: { queues: claim.streams }, max_jobs: claim.max_jobs } }),
      (answer) => [answer.heartbeats, answer.completed, answer.failed].some((items) => items.some((item) => !item.ok)),
      onAnswer,
    )
  }

  private wait(filter: WorkerFilter, denial: Claims['denial'], options: ClaimOptions, onGranted: Waiter['onGranted']): Waiter {
    let settle!: (claimed: Claims) => void
    const answer = new Promise<Claims>((resolve) => (settle = resolve))
    const onAbort = () => waiter.resolve(nothing(denial))
    const waiter: Waiter = {
      order: this.waited++,
      filter,
      maxJobs: options.maxJobs ?? 1,
      ttlS: options.ttlS,
      onGranted,
      settled: false,
      answer,
      resolve: (claimed) => {
        if (waiter.settled) return
        waiter.settled = true
        clearTimeout(waiter.timer)
        options.signal?.removeEventListener('abort', onAbort)
        this.waiting = this.waiting.filter((w) => w !== waiter)
        settle(claimed)
      },
      timer: setTimeout(() => waiter.resolve(nothing(denial)), options.maxWaitMs),
    }
    options.signal?.addEventListener('abort', onAbort, { once: true })
    this.waiting.push(waiter)
    this.armEligibleTimer()
    return waiter
  }

  /**
   * Whether a waiting claim was granted since the last call and is yet to be answered (its
   * answer waits for its promise; one with `onGranted` was answered at the commit). The HTTP
   * server asks after each request, and lets the woken claims be answered before that
   * request's own answer.
   */
  takeWoken(): boolean {
    const woken = this.woken
    this.woken = false
    return woken
  }

  /**
   * Resolves after the claims woken since the last {@link takeWoken} have been answered (one turn
   * of the event loop lets their promises settle), at once if there are none. The HTTP server
   * awaits it before each request's own answer: a request that woke waiting claims (a submit, a
   * completion that gave capacity back) is answered after them, so the worker waiting for work
   * hears of it first.
   */
  async afterWokenClaims(): Promise<void> {
    if (this.takeWoken()) await new Promise((resolve) => setImmediate(resolve))
  }

  /** Ends every wait (the host is stopping): each waiter gets a plain "nothing claimed". */
  close(): void {
    for (const unsubscribe of this.unsubscribe) unsubscribe()
    if (this.eligibleTimer) clearTimeout(this.eligibleTimer)
    for (const waiter of [...this.waiting]) {
      waiter.resolve(nothing({ granted: false, reason: 'The host is stopping', retry_after_ms: this.engine.config.denyRetryAfterMs }))
    }
  }

  /**
   * Offers the queue to each waiter, oldest first, and takes the granted ones off the list: they
   * are answered by the caller. (Should their commit fail, their own timer ends their wait.)
   */
  private offer(claim: (waiter: Waiter) => Claims | undefined): Grant[] {
    const grants: Grant[] = []
    for (const waiter of [...this.waiting]) {
      if (waiter.settled) continue
      const claimed = claim(waiter)
      if (!claimed?.granted.length) continue
      grants.push({ waiter, claimed })
      this.waiting = this.waiting.filter((w) => w !== waiter)
    }
    return grants
  }

  /**
   * A waiter was leased a job in that job's submit (Engine.serveWaitingClaims): it stops waiting
   * and is answered at the commit, as a grant of {@link offer} is. Returns the undo, should that
   * submit be rolled back: the waiter waits again in its place.
   */
  private leased(waiter: Waiter, claimed: Claims): () => void {
    const grant: Grant = { waiter, claimed }
    this.waiting = this.waiting.filter((w) => w !== waiter)
    this.leasedAtSubmit.push(grant)
    return () => {
      this.leasedAtSubmit = this.leasedAtSubmit.filter((g) => g !== grant)
      if (waiter.settled || this.waiting.includes(waiter)) return
      const after = this.waiting.findIndex((w) => w.order > waiter.order)
      this.waiting = after < 0 ? [...this.waiting, waiter] : [...this.waiting.slice(0, after), waiter, ...this.waiting.slice(after)]
    }
  }

  /** Answers a granted waiter: through its `onGranted` if it has one, then its promise. */
  private answer(waiter: Waiter, claimed: Claims): void {
    let answered = false
    if (waiter.onGranted && !waiter.settled) {
      try {
        waiter.onGranted(claimed)
        answered = true
      } catch (error) {
        // The promise below still carries the grants: the transport answers from there.
        console.error('leasehold: answering a granted claim failed:', error)
      }
    }
    waiter.resolve(claimed)
    // Answered already: the request that woke it need not wait for it (see takeWoken).
    if (!answered) this.woken = true
  }

  /**
   * Wakes the waiters if the moment their timer waits for has come on the engine's clock. The
   * host calls this on its reaper tick, so a clock that is moved (a test's, or one that jumps)
   * wakes them as promptly as the timer does in real time. No query unless it is due.
   */
  wakeIfDue(): void {
    if (this.eligibleAt !== null && this.engine.now() >= this.eligibleAt) this.wakeForEligible()
  }

  /** A requeued job's backoff ended: each grant is its own transaction, answered after it commits. */
  private wakeForEligible(): void {
    const grants = this.offer((waiter) => {
      try {
        return this.engine.claimBatch(waiter.filter, waiter.maxJobs, waiter.ttlS)
      } catch {
        return undefined // e.g. the database is closing; the waiter's own timer ends its wait
      }
    })
    for (const { waiter, claimed } of grants) this.answer(waiter, claimed)
    this.armEligibleTimer()
  }

  private armEligibleTimer(): void {
    if (this.eligibleTimer) clearTimeout(this.eligibleTimer)
    this.eligibleTimer = null
    this.eligibleAt = null
    if (this.waiting.length === 0) return
    let at: number | null
    try {
      at = this.engine.nextEligibleAt()
    } catch {
      return // the database is closing
    }
    if (at === null) return
    const delay = Math.max(0, at - this.engine.now())
    this.eligibleAt = at
    this.eligibleTimer = setTimeout(() => {
      this.eligibleTimer = null
      this.wakeForEligible()
    }, delay + 1)
  }
}
