import { type Assignment, type Claims, type Denial, type Engine, type Event, type ExchangeAnswer, WAKE_EVENTS, type WorkerExchange, type WorkerFilter } from '../engine'
import { longPollMs, STOPPING_WAIT_MS } from './long-poll'
import type { ErrorCode } from '../../src-shared/error-codes'
import type { Takes } from '../worker-roster/directory'

/**
 * Dispatch: how a job reaches a worker that asks for one. It owns the claims that wait for work,
 * their order, the lease of a job submitted while one waits (in that submit's transaction), their
 * wake-ups, and the delivery of every claim's answer. A transport (the worker API over HTTP, the
 * local workers' IPC, any other) parses a request, calls {@link Dispatch.exchange} or
 * {@link Dispatch.claim} with a {@link Deliver} and the signal of its client's going, and writes
 * what it is handed: it holds no scheduling rule and no ordering of its own.
 *
 * The rules it keeps, each held by the test of the same name in test/unit/dispatch.test.ts
 * (lease-on-submit's in test/unit/lease-on-submit.test.ts); docs/architecture.md points here
 * rather than copy them:
 *
 * - **A waiting claim never misses work committed in the same group.** The wait begins inside
 *   the operation that found nothing, and every commit that carries a wake event (a submit, a
 *   requeue, a lease given back, a capacity change) offers its work to the waiting claims
 *   before it commits; a moment no event marks (a backoff's end, a delayed job's `run_at`) is
 *   caught by the eligible timer.
 * - **No answer is delivered before its COMMIT.** A waiting claim is granted inside the commit
 *   and delivered from the commit's listener; any other answer once its group has committed.
 * - **The answer that grants a waiting claim is delivered from its commit, before the request
 *   that woke it is answered**: the worker waiting for work hears of it first.
 * - **A claim whose worker is gone is never granted, or its grant is handed back.** A claim
 *   whose signal has aborted stops waiting and claims nothing; one granted as its client went is
 *   answered without its jobs, whose leases are given back at once (`Engine.handBackLeases`),
 *   costing no attempt.
 * - **Each answer is delivered exactly once**, whichever of the grant, the wait's end, an abort
 *   or the host's stop comes first; a deliver that throws is logged and not called again.
 * - **Waiting claims are served oldest first**, each within its own streams, and a grant follows
 *   the same head-of-line rule as any claim.
 * - **A worker whose lease expired for its silence is handed no job by a claim it left waiting**:
 *   those claims end with nothing claimed inside the expiry's transaction; it is served again
 *   once it asks again.
 * - **A worker's reports sent with a claim that waits commit with the work that answers it**:
 *   nobody hears of them before that claim is answered, so their group stays open past its
 *   turn (up to `groupWaitMs`, engine/store/transaction.ts) for the submit that brings the next
 *   job, and one commit carries both; with no work coming they commit alone when it ends.
 * - **Lease-on-submit obeys the same capacity, priority and head-of-line rules as a claim**: a
 *   one-job submit is leased in its own submit only when that is certain to be what the claims'
 *   turn at the commit would decide (engine/verbs/grants.ts `grantOnSubmit`;
 *   random runs made both ways must answer every claim the same jobs).
 */

/**
 * Where a transport hands a request's answer: called exactly once per request, after the commit
 * that holds what it answers; for a claim that waited and was granted, from inside that commit's
 * listener, so the transport writes it before any other work of the host runs.
 */
export type Deliver<A> = (answer: A) => void

/**
 * A signal that aborts when the client is gone (an HTTP connection closed, a worker process
 * exited). Asked for only by a claim that may wait: a transport whose signal costs something to
 * make makes it only then.
 */
export type Gone = () => AbortSignal

/** A worker's one-job claim as the transports carry it (the worker API's /claim). */
export interface ClaimRequest {
  worker_id: string
  /** The streams (queues) it takes jobs from, in its order of preference; all when absent. */
  streams?: string[]
  /** The job types it runs; any when absent. */
  job_types?: string[]
  /** Whether it has a GPU (jobs with `constraints.gpu_required` go only to one that has); absent: it has none. */
  gpu_available?: boolean
  /** How long it waits for work when none can be leased now: capped at the long-poll limit. */
  max_wait_ms?: number
  ttl_s?: number
}

/**
 * The reports of an exchange the host refused before they reached the engine (each failed its
 * own schema: src-main/http/exchange-body.ts), by their list and their place in the list as
 * sent; the exchange carries only the others.
 */
export const REFUSED_REPORTS = Symbol('refused reports')

/** A report refused on its own: the job it named (as sent, or "" when it named none) and `{code, detail}`. */
export interface ReportRefusal {
  job_id: string
  code: ErrorCode
  detail: string
}

/** See {@link REFUSED_REPORTS}. */
export type RefusedReports = Record<'heartbeat' | 'complete' | 'fail', ReadonlyMap<number, ReportRefusal>>

/** A worker's exchange as the transports carry it: its reports, and a claim named by streams. */
export type ExchangeRequest = Omit<WorkerExchange, 'claim'> & {
  claim?: { streams: string[]; job_types?: string[]; gpu_available?: boolean; max_jobs: number; max_wait_ms?: number }
  /** Absent when every report passed its schema (a symbol: no field of the wire's; kept out of what the engine is given). */
  [REFUSED_REPORTS]?: RefusedReports
}

/** What a worker's claim asks of the engine: the jobs of its streams and types, and those needing a GPU only if it has one. */
function claimFilter(claim: { streams?: string[]; job_types?: string[]; gpu_available?: boolean }): Omit<WorkerFilter, 'worker_id'> {
  return { queues: claim.streams, accept_job_types: claim.job_types ?? null, gpu_available: claim.gpu_available === true }
}

/** The same claim as the worker directory keeps it. */
function claimTakes(claim: { streams?: string[]; job_types?: string[]; gpu_available?: boolean }): Takes {
  return { jobTypes: claim.job_types ?? null, streams: claim.streams ?? null, gpu: claim.gpu_available === true }
}

/**
 * Whether an exchange's claim may wait for work: not when it carries heartbeats. A heartbeat's
 * answer must reach its worker before the lease it extends runs out, and a wait (up to
 * {@link longPollMs}'s 30 s) is longer than a short lease's TTL and grace.
 */
function waitsForWork(request: Pick<ExchangeRequest, 'heartbeat' | typeof REFUSED_REPORTS>): boolean {
  return (request.heartbeat?.length ?? 0) === 0 && request[REFUSED_REPORTS] === undefined
}

/**
 * An answer, and how long its claim waited here for its jobs, in milliseconds: 0 when it was
 * answered at its first try (jobs were queued, or there was no claim), and when it claimed
 * nothing (the wait ended empty, or the worker went). A worker paces its next
 * claim by it (src-worker/exchange-plan.ts `ClaimPace`): the host's own reading, not the round
 * trip, which a busy host or a long way adds to.
 */
export type Served<R> = R & { claimWaitedMs: number }
export type ServedExchange = Served<ExchangeAnswer>

export interface DispatchOptions {
  /** Told of every claim: its worker, the job types it runs, the queues it takes (null: any) and whether it has a GPU. The host's worker directory keeps them. */
  onClaim?(workerId: string, takes: Takes): void
  /**
   * Called before the waiting claims are offered work: a claim's token was checked when it came,
   * and one revoked since must not be handed a job. The host looks at its scoped tokens here, and
   * a revoke ends the waits ({@link Dispatch.endWaits}) before any is granted.
   */
  beforeGrant?(): void
}

interface Waiter {
  /** Its place in the order of waiting: claims are served oldest first. */
  order: number
  filter: WorkerFilter
  maxJobs: number
  ttlS: number | undefined
  /** Delivers the claim's answer from the commit that grants it. */
  onGranted: (claimed: Claims) => void
  /** How long it waited for its jobs, in milliseconds: set as it settles; 0 when it settles with none. */
  waitedMs: number
  /**
   * The moment, on the engine's clock, it last looked at the queue (its own try, or an offer):
   * every job eligible by then was offered to it, and one eligible since has not been.
   */
  offeredAt: number
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

/** What one request of a worker asks of dispatch: the filter and size of its claim, and the operation that makes it. */
interface Serving<R extends { claimed: Claims }> {
  filter: WorkerFilter
  maxJobs: number
  ttlS?: number
  maxWaitMs: number
  /** Runs the request's engine calls; with a `denial` (its worker already gone, the host stopping) its claim is answered that instead. */
  op(denial: Denial | null): R
  /** The answer is news the worker must have at once: it does not wait. */
  answerNow(answer: R): boolean
}

const nothing = (denial: Claims['denial']): Claims => ({ granted: [], denial })

/** The longest delay a Node timer takes (2^31 - 1 ms, ~24.8 days); a longer one fires at once. */
const MAX_TIMER_MS = 2 ** 31 - 1

/** Work arrived or capacity came back (engine/rules/events.ts decides which events say so). */
const isWakeEvent = (event: Event): boolean => WAKE_EVENTS.has(event.event_type)

/**
 * The claims that wait for work (the worker API's long-poll, the local workers' IPC), and every
 * answer to a worker's claim. A claim that cannot be leased now waits. A commit that makes work
 * or capacity available leases it to the waiters, oldest first, inside that same commit: one
 * transaction writes the submit and the grant, and the worker is answered as soon as it is
 * durable, before the submitter. (A one-job submit that the first waiter would take leases it
 * itself, and its group commits as that submit ends: grants.ts `grantOnSubmit`.) The database is
 * never polled in a loop.
 */
export class Dispatch {
  private waiting: Waiter[] = []
  /** Claims that have waited so far: the next one's {@link Waiter.order}. */
  private waited = 0
  /** Waiters leased a job in its submit, inside the transaction in progress: answered at its commit. */
  private leasedAtSubmit: Grant[] = []
  /** The grants made inside each commit in progress, keyed by its events (see CommitListener). */
  private readonly grantsByCommit = new WeakMap<readonly Event[], Grant[]>()
  /**
   * Wakes the waiters when the next requeued job's backoff ends or a delayed job's `run_at`
   * comes: no event marks that moment.
   */
  private eligibleTimer: NodeJS.Timeout | null = null
  /** The moment {@link eligibleTimer} is set for, on the engine's clock. */
  private eligibleAt: number | null = null
  private readonly unsubscribe: (() => void)[]
  /** The host is stopping ({@link close}): no claim is granted or waits for work. */
  private closed = false

  constructor(
    private readonly engine: Engine,
    private readonly options: DispatchOptions = {},
  ) {
    this.unsubscribe = [
      engine.beforeCommit((events) => {
        const grants = this.leasedAtSubmit
        this.leasedAtSubmit = []
        if (this.waiting.length > 0 && events.some(isWakeEvent)) {
          this.options.beforeGrant?.()
          // Inside the committing transaction; a grant that fails undoes only itself.
          grants.push(...this.offer((waiter) => engine.claimInCommit(waiter.filter, waiter.maxJobs, waiter.ttlS)))
        }
        if (grants.length > 0) this.grantsByCommit.set(events, grants)
      }),
      engine.onWorkerSilent((workerId) => this.endWaitsOf(workerId)),
      // A job submitted while claims wait may go to the first of them in its own submit.
      engine.serveWaitingClaims({ waiting: () => this.waitingToGrant(), leased: (claim, claimed) => this.leased(claim as Waiter, claimed) }),
      engine.onCommit((events) => {
        const grants = this.grantsByCommit.get(events) ?? []
        this.grantsByCommit.delete(events)
        for (const { waiter, claimed } of grants) this.answer(waiter, claimed)
        // A requeue may have set a later eligible time for the waiters still waiting.
        if (grants.length > 0 || events.some(isWakeEvent)) this.armEligibleTimer()
      }),
    ]
  }

  /** The claims waiting now, about to be offered work: {@link DispatchOptions.beforeGrant} has ended those it must. */
  private waitingToGrant(): readonly Waiter[] {
    if (this.waiting.length > 0) this.options.beforeGrant?.()
    return this.waiting
  }

  /** How many claims wait now. */
  get size(): number {
    return this.waiting.length
  }

  /**
   * A worker's one-job claim (the worker API's /claim): leased at once if a job can be, otherwise
   * waits up to `max_wait_ms` for one. `deliver` gets the answer once (see {@link Deliver}); the
   * promise settles with the same answer, and rejects, having delivered nothing, when the claim
   * fails (the transport answers the error).
   */
  async claim(request: ClaimRequest, deliver: Deliver<Assignment | Denial>, gone?: Gone): Promise<Assignment | Denial> {
    const filter: WorkerFilter = { worker_id: request.worker_id, ...claimFilter(request) }
    this.options.onClaim?.(request.worker_id, claimTakes(request))
    const decision = ({ claimed }: { claimed: Claims }) => claimed.granted[0] ?? claimed.denial!
    const { claimed } = await this.serve(
      {
        filter,
        maxJobs: 1,
        ttlS: request.ttl_s,
        maxWaitMs: longPollMs(request.max_wait_ms),
        op: (denial) => ({ claimed: denial ? nothing(denial) : this.engine.claimBatch(filter, 1, request.ttl_s) }),
        answerNow: () => false,
      },
      (answer) => deliver(decision(answer)),
      gone,
    )
    return decision({ claimed })
  }

  /**
   * A worker's exchange (the worker API's /batch, the local workers' IPC `exchange`): its reports,
   * then a claim of up to `max_jobs` that waits up to `max_wait_ms` when nothing could be leased.
   * Two kinds of exchange are answered at once, their claim taking what is queued now:
   * - one that carries heartbeats ({@link waitsForWork}): a heartbeat's answer is the lease's new
   *   expiry, or news that stops a job (a cancel asked for, the lease lost); held by the wait it
   *   would come after the lease it extends had expired.
   * - one with a report the host refused (its lease was lost, or it failed its schema): the
   *   worker learns now that it must drop a result or stop a handler, not when work next comes.
   * Delivered and settled as {@link claim} is.
   */
  exchange(request: ExchangeRequest, deliver: Deliver<ServedExchange>, gone?: Gone): Promise<ServedExchange> {
    const { claim, [REFUSED_REPORTS]: _refused, ...reports } = request
    if (claim) this.options.onClaim?.(request.worker_id, claimTakes(claim))
    const filter = claim ? claimFilter(claim) : { queues: [], accept_job_types: null }
    return this.serve(
      {
        filter: { worker_id: request.worker_id, ...filter },
        maxJobs: claim?.max_jobs ?? 1,
        maxWaitMs: claim && waitsForWork(request) ? longPollMs(claim.max_wait_ms) : 0,
        op: (denial) => {
          const answer = this.engine.exchange({ ...reports, claim: !denial && claim ? { filter, max_jobs: claim.max_jobs } : undefined })
          return !denial || !claim ? answer : { ...answer, claimed: nothing(denial) }
        },
        answerNow: (answer) => [answer.heartbeats, answer.completed, answer.failed].some((items) => items.some((item) => !item.ok)),
      },
      deliver,
      gone,
    )
  }

  /**
   * Runs the request's operation in the engine's commit group; if it leased nothing, waits for
   * up to `maxJobs` jobs — unless its answer is news the worker must have at once. The wait
   * starts inside that same operation: work that another operation of the group makes available
   * is offered to it before the group commits, never missed between the try and the wait.
   */
  private async serve<R extends { claimed: Claims }>(serving: Serving<R>, deliver: Deliver<Served<R>>, gone: Gone | undefined): Promise<Served<R>> {
    let delivered = false
    const deliverOnce = (answer: Served<R>): void => {
      if (delivered) return
      delivered = true
      try {
        deliver(answer)
      } catch (error) {
        // The transport's own fault (a socket gone mid-write): nothing to answer it with.
        console.error('leasehold: delivering an answer failed:', error)
      }
    }
    const signal = serving.maxWaitMs > 0 ? gone?.() : undefined
    if (this.closed) return this.whileStopping(serving, deliverOnce, signal)
    let waiter: Waiter | null = null
    let first: R
    try {
      first = await this.engine.run(() => {
        const lookedAt = this.engine.now()
        const answer = serving.op(signal?.aborted ? this.goneDenial() : null)
        const waits = answer.claimed.granted.length === 0 && serving.maxWaitMs > 0 && !signal?.aborted && !serving.answerNow(answer)
        if (waits) {
          const waiting: Waiter = this.wait(serving, answer.claimed.denial, lookedAt, signal, (claimed) => deliverOnce({ ...answer, claimed, claimWaitedMs: waiting.waitedMs }))
          waiter = waiting
          // Its answer waits for work: the commit of the work's submit may carry its reports too.
          this.engine.commitMayWait()
        }
        return answer
      })
    } catch (error) {
      ;(waiter as Waiter | null)?.resolve(nothing(null))
      throw error
    }
    const registered = waiter as Waiter | null
    const handBack = signal?.aborted === true && first.claimed.granted.length > 0
    const answer = registered
      ? { ...first, claimed: await registered.answer, claimWaitedMs: registered.waitedMs }
      : { ...(handBack ? await this.handBack(first, serving.filter.worker_id) : first), claimWaitedMs: 0 }
    deliverOnce(answer)
    return answer
  }

  /**
   * A request while the host stops: its reports are taken as ever, its claim granted nothing,
   * and an answer that would have waited for work waits {@link STOPPING_WAIT_MS} (or until its
   * client goes) instead.
   */
  private async whileStopping<R extends { claimed: Claims }>(serving: Serving<R>, deliver: (answer: Served<R>) => void, signal: AbortSignal | undefined): Promise<Served<R>> {
    const stopping: Denial = { granted: false, reason: 'The host is stopping', retry_after_ms: STOPPING_WAIT_MS }
    const answer = { ...(await this.engine.run(() => serving.op(stopping))), claimWaitedMs: 0 }
    if (serving.maxWaitMs > 0 && !serving.answerNow(answer) && !signal?.aborted) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, Math.min(serving.maxWaitMs, STOPPING_WAIT_MS))
        function done() {
          clearTimeout(timer)
          signal?.removeEventListener('abort', done)
          resolve()
        }
        signal?.addEventListener('abort', done, { once: true })
      })
    }
    deliver(answer)
    return answer
  }

  /**
   * A claim granted at its first try whose client went before the grant committed: its leases
   * expire now, and it is answered without them.
   */
  private async handBack<R extends { claimed: Claims }>(answer: R, workerId: string): Promise<R> {
    const leaseIds = answer.claimed.granted.map((granted) => granted.lease_id)
    await this.engine.run(() => this.engine.handBackLeases(workerId, leaseIds))
    return { ...answer, claimed: nothing(this.goneDenial()) }
  }

  /** The answer of a claim whose worker is gone. */
  private goneDenial(): Denial {
    return { granted: false, reason: 'The worker is gone', retry_after_ms: this.engine.config.denyRetryAfterMs }
  }

  private wait(serving: Serving<{ claimed: Claims }>, denial: Claims['denial'], lookedAt: number, signal: AbortSignal | undefined, onGranted: Waiter['onGranted']): Waiter {
    let settle!: (claimed: Claims) => void
    const answer = new Promise<Claims>((resolve) => (settle = resolve))
    const onAbort = () => waiter.resolve(nothing(denial))
    const since = performance.now()
    const waiter: Waiter = {
      order: this.waited++,
      filter: serving.filter,
      maxJobs: serving.maxJobs,
      ttlS: serving.ttlS,
      onGranted,
      waitedMs: 0,
      offeredAt: lookedAt,
      settled: false,
      answer,
      resolve: (claimed) => {
        if (waiter.settled) return
        waiter.settled = true
        waiter.waitedMs = claimed.granted.length > 0 ? performance.now() - since : 0
        clearTimeout(waiter.timer)
        signal?.removeEventListener('abort', onAbort)
        this.waiting = this.waiting.filter((w) => w !== waiter)
        settle(claimed)
      },
      timer: setTimeout(() => waiter.resolve(nothing(denial)), serving.maxWaitMs),
    }
    signal?.addEventListener('abort', onAbort, { once: true })
    this.waiting.push(waiter)
    this.armEligibleTimer()
    return waiter
  }

  /**
   * Ends every wait now with "nothing claimed", the host going on: a worker token was revoked,
   * and a claim checked before that must not be handed work. Each worker asks again at once, and
   * one whose token no longer works is refused then.
   */
  endWaits(reason: string, retryAfterMs = 0): void {
    for (const waiter of [...this.waiting]) waiter.resolve(nothing({ granted: false, reason, retry_after_ms: retryAfterMs }))
  }

  /**
   * A lease of `workerId` expired for its silence: the claims it left waiting end now with nothing
   * claimed, before any job is offered to them. A worker that stopped (a paused process, a machine
   * cut off) would otherwise be handed, oldest first, the very job whose lease it lost, and new
   * ones ahead of idle workers that are heard from, each then waiting out another TTL and costing
   * an attempt. A worker that is alive reads the empty answer and asks again, and is served.
   */
  private endWaitsOf(workerId: string): void {
    const reason = `A lease of worker ${workerId} expired: it was not heard from within the lease's TTL and grace`
    for (const waiter of [...this.waiting]) if (waiter.filter.worker_id === workerId) waiter.resolve(nothing({ granted: false, reason, retry_after_ms: 0 }))
  }

  /**
   * The host is stopping: every wait ends now with "nothing claimed", and from now on no claim
   * is granted; one that would wait is answered with nothing after at most
   * {@link STOPPING_WAIT_MS}, so its worker asks no faster than once a second while the host
   * finishes its reports (a drain's completions) and no wait holds the stop up.
   */
  close(): void {
    if (this.closed) return
    this.closed = true
    for (const unsubscribe of this.unsubscribe) unsubscribe()
    if (this.eligibleTimer) clearTimeout(this.eligibleTimer)
    this.endWaits('The host is stopping', this.engine.config.denyRetryAfterMs)
  }

  /**
   * Offers the queue to each waiter, oldest first, and takes the granted ones off the list: they
   * are answered by the caller. (Should their commit fail, their own timer ends their wait.)
   */
  private offer(claim: (waiter: Waiter) => Claims | undefined): Grant[] {
    const grants: Grant[] = []
    const offeredAt = this.engine.now()
    for (const waiter of [...this.waiting]) {
      if (waiter.settled) continue
      const claimed = claim(waiter)
      if (!claimed?.granted.length) {
        waiter.offeredAt = offeredAt
        continue
      }
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

  /** Answers a granted waiter: settled (its wait ends now), delivered now from the commit's listener, and its promise settles after. */
  private answer(waiter: Waiter, claimed: Claims): void {
    if (waiter.settled) return
    waiter.resolve(claimed)
    waiter.onGranted(claimed)
  }

  /**
   * Wakes the waiters if the moment their timer waits for has come on the engine's clock. The
   * host calls this on each pass of its reaper, so a clock that jumps wakes them within a second,
   * and a test's clock that is moved as promptly as the timer does in real time. No query unless
   * it is due.
   */
  wakeIfDue(): void {
    if (this.eligibleAt !== null && this.engine.now() >= this.eligibleAt) this.wakeForEligible()
  }

  /**
   * Capacity grew with no event to say so (the busy rating fell by less than the point that
   * logs one): the waiting claims are offered the queue again, as when a backoff ends.
   */
  capacityGrew(): void {
    if (this.waiting.length > 0) this.wakeForEligible()
  }

  /**
   * A requeued job's backoff ended: each grant is its own transaction, answered after it commits.
   * A group still open (a worker's reports waiting for work, `commitMayWait`) commits first: its
   * commit offers the queue to the waiters itself, and one it answers must not be leased more
   * jobs here, which nobody would tell it of.
   */
  private wakeForEligible(): void {
    this.engine.flush()
    if (this.waiting.length > 0) this.options.beforeGrant?.()
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
    // From the moment the waiter that looked longest ago last looked: a job that became eligible
    // since (between an offer and this call, on a busy host) is due now, not lost for being past.
    let since = Infinity
    for (const waiter of this.waiting) since = Math.min(since, waiter.offeredAt)
    let at: number | null
    try {
      at = this.engine.nextEligibleAt(since)
    } catch {
      return // the database is closing
    }
    if (at === null) return
    const delay = Math.max(0, at - this.engine.now())
    this.eligibleAt = at
    // Capped at the longest timer Node can set: a job delayed further (`--in 25d`) wakes the
    // claims once early, finds nothing and sleeps again; uncapped, Node fires the timer at once.
    this.eligibleTimer = setTimeout(() => {
      this.eligibleTimer = null
      this.wakeForEligible()
    }, Math.min(delay + 1, MAX_TIMER_MS))
  }
}
