import { randomUUID } from 'node:crypto'
import { hostname } from 'node:os'
import type { Redis } from 'ioredis'
import { foreignHolder, prefixClaimKey } from '../../src-shared/redis-streams'

/**
 * One host per Redis prefix (docs/redis.md, "One host per prefix"). Two hosts on one prefix
 * would read each other's workers' requests (one group, one consumer name) and rewrite each
 * other's queue streams, and neither could tell. So a host claims its prefix: the key
 * `<prefix>host` holds its identity, set only while no other host holds it, with an expiry the
 * host refreshes each time it checks that Redis answers (every second). A host that died leaves
 * the key to expire; one restarted on the same data dir knows the identity as its own and takes
 * it back at once. A host that finds another on its prefix touches none of its keys: at start it
 * refuses to start; later (its claim lapsed while it could not refresh it, or Redis lost it and
 * another host claimed it first) it stops using Redis until it is restarted, rather than fight.
 */

/** How long a claim lasts unrefreshed: a host killed without releasing it keeps other hosts off its prefix this long. */
export const CLAIM_TTL_MS = 10_000

/** Who a host is to other hosts: an id kept across its restarts, and words that tell a person which host it is. */
export interface HostIdentity {
  /** No spaces: the key holds the id, a space and the description. */
  id: string
  description: string
}

/** The identity of a host on `dataDir` whose database's id is `databaseId`. */
export function hostIdentity(databaseId: string, dataDir: string): HostIdentity {
  return { id: databaseId, description: `pid ${process.pid} on ${hostname()}, data dir ${dataDir}` }
}

/** An identity of this process alone (a relay without a data dir's: its restart waits out the claim's expiry). */
export function processIdentity(): HostIdentity {
  return { id: randomUUID(), description: `pid ${process.pid} on ${hostname()}` }
}

/**
 * Claims (or refreshes) KEYS[1] for the id ARGV[1], as the value ARGV[2], for ARGV[3] ms, unless
 * another id holds it. Answers that holder's value, or nil when the claim is the caller's.
 */
const CLAIM = `local held = redis.call('get', KEYS[1])
if held and string.match(held, '^%S+') ~= ARGV[1] then return held end
redis.call('set', KEYS[1], ARGV[2], 'px', ARGV[3])
return false`

/** A claim's value, as {@link CLAIM} sets it: the host's id, a space, and its description (group 1). */
const CLAIM_VALUE = /^\S+ (pid \d+ on [^]*)$/

/** Deletes KEYS[1] if the id ARGV[1] holds it. */
const RELEASE = `local held = redis.call('get', KEYS[1])
if held and string.match(held, '^%S+') == ARGV[1] then redis.call('del', KEYS[1]) end
return 0`

/**
 * Where the claim stands: not yet answered (Redis has not been reached), held by this host, or
 * taken by another host (for good: the host no longer uses Redis until restarted).
 */
export type ClaimState = 'unknown' | 'held' | 'taken'

export class PrefixClaim {
  private current: ClaimState = 'unknown'
  /** The other host's description, once one was found on the prefix. */
  private holder: string | null = null
  private readonly listeners = new Set<() => void>()
  /**
   * Redis's refusal of the claim's commands at the last renewal (an ACL user without EVAL, GET or
   * SET), or null: while refused, the prefix is used unchecked, and each renewal asks again.
   */
  private refused: string | null = null

  constructor(
    readonly prefix: string,
    private readonly identity: HostIdentity,
  ) {}

  get state(): ClaimState {
    return this.current
  }

  /** Who holds the prefix instead of this host (the words it claimed it with); null unless taken. */
  get takenBy(): string | null {
    return this.holder
  }

  /** Claims the prefix, or refreshes the claim; once another host is found holding it, asks Redis nothing more. */
  async renew(redis: Redis): Promise<ClaimState> {
    if (this.current === 'taken') return this.current
    const { id, description } = this.identity
    let held: string | null
    let refused: string | null = null
    try {
      held = (await redis.eval(CLAIM, 1, prefixClaimKey(this.prefix), id, `${id} ${description}`, CLAIM_TTL_MS)) as string | null
    } catch (error) {
      if (!/NOPERM|can't run this command/.test((error as Error).message)) throw error
      // A Redis user set up before hosts claimed their prefix: the transport works as it did, unchecked, until its ACL allows the claim.
      refused = (error as Error).message
      held = null
    }
    if (this.state === 'taken') return this.current // another renewal found the holder meanwhile
    const next: ClaimState = held === null ? 'held' : 'taken'
    if (next !== this.current || refused !== this.refused) {
      this.current = next
      this.refused = refused
      // A claim is an id, a space and a description (`pid … on …`); anything else is some other application's key.
      if (held !== null) this.holder = CLAIM_VALUE.exec(held)?.[1] ?? foreignHolder(held)
      for (const listener of this.listeners) listener()
    }
    return this.current
  }

  /** Why Redis refused the claim at the last renewal (the host's Redis user lacks EVAL, GET or SET), or null when the claim is checked. */
  get refusal(): string | null {
    return this.refused
  }

  /** Deletes the claim if this host holds it: a host that stops leaves its prefix free at once. */
  async release(redis: Redis): Promise<void> {
    if (this.current !== 'held' || this.refused !== null) return
    await redis.eval(RELEASE, 1, prefixClaimKey(this.prefix), this.identity.id)
  }

  /** Told when the state changes. Returns the function that stops telling. */
  onChange(listener: () => void): () => void {
    this.listeners.add(listener)
    return () => this.listeners.delete(listener)
  }

  /** Resolves once the prefix is this host's: at once if it is, never if another host holds it; rejects when `signal` aborts. */
  whenHeld(signal: AbortSignal): Promise<void> {
    if (this.current === 'held') return Promise.resolve()
    if (signal.aborted) return Promise.reject(signal.reason)
    return new Promise((resolve, reject) => {
      const settle = () => {
        off()
        signal.removeEventListener('abort', aborted)
      }
      const aborted = () => {
        settle()
        reject(signal.reason)
      }
      const off = this.onChange(() => {
        if (this.current !== 'held') return
        settle()
        resolve()
      })
      signal.addEventListener('abort', aborted, { once: true })
    })
  }
}
