import type { Engine, SparedWorkers } from '../engine'
import type { RedisRelay } from './relay'

/** The fewest recorded workers at which those that hold no lease are forgotten. */
const MIN_FORGET_AT = 64

/**
 * The leases of remote workers over Redis (redis/worker-requests.ts) while the host cannot hear
 * Redis. Their heartbeats can reach the host by no other way, so their silence then says nothing
 * about them: while the relay reads Redis not connected (redis/answering.ts), the reaper expires
 * none of them, and once Redis answers again each lasts its TTL and grace from then, as if
 * heartbeated at that moment. A worker that died meanwhile loses its lease one TTL (and grace)
 * after Redis came back; local and HTTP workers' leases expire as ever.
 *
 * The remote workers heard from are recorded in the database (and forgotten once they hold no
 * lease), so that a host that starts while Redis does not answer spares their leases too: it has
 * not heard Redis since it started.
 */
export class RedisLeaseHold {
  /** The remote workers over Redis that may hold a lease, as the database records them. */
  private workers: Set<string>
  /** Redis was found not answering, and the leases spared meanwhile have not been renewed since. */
  private away = false
  /** How many recorded workers make {@link heard} forget those that hold no lease. */
  private forgetAt = MIN_FORGET_AT
  private readonly stopSparing: () => void

  constructor(
    private readonly engine: Engine,
    private readonly redis: Pick<RedisRelay, 'connected'>,
    private readonly log: (line: string) => void,
  ) {
    this.workers = new Set(engine.redisWorkersHoldingLeases())
    this.stopSparing = engine.spareLeases(() => this.spared())
  }

  /** A request of remote worker `workerId` was taken: it is recorded before it can hold a lease. */
  heard(workerId: string): void {
    if (this.workers.has(workerId)) return
    // Workers that come and go under new ids would grow the record for ever between outages:
    // once it doubles, those that hold no lease are forgotten (a worker heard again is recorded again).
    if (this.workers.size >= this.forgetAt) {
      this.workers = new Set(this.engine.redisWorkersHoldingLeases())
      this.forgetAt = Math.max(MIN_FORGET_AT, 2 * this.workers.size)
    }
    this.engine.recordRedisWorker(workerId)
    this.workers.add(workerId)
  }

  /**
   * Called by the reaper before each pass: notes that Redis does not answer, or, the first time
   * it answers again, renews the leases spared meanwhile. Until then they stay spared, so that a
   * report read as Redis comes back, before this, does not find its lease expired.
   */
  check(): void {
    if (!this.redis.connected) this.away = true
    else if (this.away) this.renew()
  }

  stop(): void {
    this.stopSparing()
  }

  /** The workers whose leases are spared now: the remote ones while Redis does not answer, and until their leases are renewed. */
  private spared(): SparedWorkers {
    return this.away || !this.redis.connected ? this.workers : null
  }

  /** Redis answers again: the leases spared meanwhile count their silence from now. */
  private renew(): void {
    const renewed = this.engine.renewLeasesOf(this.workers)
    this.away = false
    this.workers = new Set(this.engine.redisWorkersHoldingLeases())
    if (renewed > 0) this.log(`leasehold: Redis answers again: ${renewed} lease(s) of remote workers over Redis last their TTL and grace from now (their heartbeats could not reach the host meanwhile)`)
  }
}
