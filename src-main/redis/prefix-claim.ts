import { randomUUID } from 'node:crypto'
import { hostname } from 'node:os'
import type { Redis } from 'ioredis'
import { foreignHolder, globEscaped, nestingHolder, prefixClaimKey, prefixesNest } from '../../src-shared/redis-streams'
import { scanKeys } from './keys'

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
 *
 * Two prefixes that nest (one begins the other: `leasehold:` and `leasehold:q:`) share keys: the
 * queue `q:default` of the one is the queue `default` of the other, and a queue name may hold
 * any `:`, so no key tells whose it is. So the first claim of a prefix also looks for the live
 * claims of other hosts on prefixes that nest with it, and one found is taken as its prefix's
 * own claim would be: the host refuses to start, or (Redis answered late) stops using Redis.
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

/** A live claim of another host: the prefix it claims, and the words it describes itself with. */
export interface OtherClaim {
  prefix: string
  description: string
}

/**
 * The live claims of hosts other than `ownId` among the keys that match `match` (a MATCH pattern
 * of `<prefix>host` keys). A key its Redis user may not read (NOPERM), or that holds no Leasehold
 * claim (another application's key), names no host.
 */
async function claimsMatching(redis: Redis, match: string, ownId: string): Promise<OtherClaim[]> {
  const suffix = prefixClaimKey('')
  const keys = (await scanKeys(redis, match, 'string')).filter((key) => key.endsWith(suffix))
  if (keys.length === 0) return []
  const values = (await redis.pipeline(keys.map((key) => ['get', key])).exec()) ?? []
  return keys.flatMap((key, i) => {
    const [error, value] = values[i] ?? [null, null]
    if (error || typeof value !== 'string' || /^\S+/.exec(value)?.[0] === ownId) return []
    const described = CLAIM_VALUE.exec(value)
    return described ? [{ prefix: key.slice(0, -suffix.length), description: described[1]! }] : []
  })
}

/** The key's time to live (PTTL) in ms; null when it has none, is gone, or Redis refuses the command (an ACL without PTTL). */
async function expiresInMs(redis: Redis, key: string): Promise<number | null> {
  try {
    const ms = await redis.pttl(key)
    return ms > 0 ? ms : null
  } catch {
    return null
  }
}

/**
 * Where the claim stands: not yet answered (Redis has not been reached), held by this host, or
 * taken by another host (for good: the host no longer uses Redis until restarted).
 */
export type ClaimState = 'unknown' | 'held' | 'taken'

export class PrefixClaim {
  private current: ClaimState = 'unknown'
  /** The other host's description, once one was found on the prefix. */
  private holder: string | null = null
  /** How long the holder's claim had to run when it was found (Redis's PTTL), or null when unknown or without expiry. */
  private holderExpiresInMs: number | null = null
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
    // Read before the state changes, so that those told of the change find it.
    const heldForMs = held === null ? null : await expiresInMs(redis, prefixClaimKey(this.prefix))
    if (this.state === 'taken') return this.current // another renewal found the holder meanwhile
    // The first claim made: before any other key of the prefix is touched, no host may be on a prefix that nests with it.
    const nesting = held === null && this.current === 'unknown' ? (await this.nesting(redis))[0] : undefined
    if ((this.state as ClaimState) === 'taken') return this.current // found meanwhile, as above
    if (nesting) {
      if (refused === null) await redis.eval(RELEASE, 1, prefixClaimKey(this.prefix), id).catch(() => {}) // the prefix left to whoever may use it
      this.current = 'taken'
      this.holder = nestingHolder(nesting.description, nesting.prefix)
      for (const listener of this.listeners) listener()
      return this.current
    }
    const next: ClaimState = held === null ? 'held' : 'taken'
    if (next !== this.current || refused !== this.refused) {
      this.current = next
      this.refused = refused
      // A claim is an id, a space and a description (`pid … on …`); anything else is some other application's key.
      if (held !== null) {
        this.holder = CLAIM_VALUE.exec(held)?.[1] ?? foreignHolder(held)
        this.holderExpiresInMs = heldForMs
      }
      for (const listener of this.listeners) listener()
    }
    return this.current
  }

  /**
   * How long the holder's claim had left when it was found: a host that was killed (its pid gone)
   * leaves its claim to expire, and another may take the prefix then. Null when Redis did not say.
   */
  get takenForMs(): number | null {
    return this.holderExpiresInMs
  }

  /**
   * The live claims of other hosts on prefixes that nest with this one (one begins the other),
   * looked for over the whole keyspace: a shorter prefix's claim is no key of this prefix. A
   * Redis user not allowed to SCAN finds none (such a user cannot reconcile either, and says so).
   */
  async nesting(redis: Redis): Promise<OtherClaim[]> {
    const claims = await claimsMatching(redis, `*${globEscaped(prefixClaimKey(''))}`, this.identity.id).catch((error: Error) => {
      if (/NOPERM/.test(error.message)) return []
      throw error
    })
    return claims.filter((claim) => prefixesNest(claim.prefix, this.prefix))
  }

  /**
   * The live claims of other hosts on longer prefixes that begin with this one (`leasehold:q:`
   * within `leasehold:`): the keys under them are that host's, though they begin with this prefix.
   */
  async within(redis: Redis): Promise<OtherClaim[]> {
    const claims = await claimsMatching(redis, `${globEscaped(this.prefix)}?*${globEscaped(prefixClaimKey(''))}`, this.identity.id)
    return claims.filter((claim) => claim.prefix.startsWith(this.prefix) && claim.prefix !== this.prefix)
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
