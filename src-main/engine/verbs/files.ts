import type { AcquireRefusalCode } from '../../../src-shared/error-codes'
import { printable } from '../../../src-shared/printable'
import type { BlockerRow, FileContentionRow, FileHandoverRow, FileLeaseRow, LeaseRow } from '../../db/schema'
import { SECOND } from '../rules/clock'
import { type JobState, TERMINAL_STATES } from '../rules/states'
import { fileKey, keysAbove, keysBelow } from '../rules/file-keys'
import type { EngineContext } from '../memory/context'
import { EngineError, invalid } from '../rules/errors'
import type { Contention, FileReleaseReason } from '../rules/file-leases'
import { answeredBy, type Resolution } from '../rules/blockers'
import { decodeCursor, encodeCursor, MAX_LIST_LIMIT, pageLimit, type PageRequest } from '../reads/list'
import { cancelRequestedBy } from '../reads/timeline'
import { newId } from '../store/ids'
import { cancelNow, NOTHING_SAID } from './moves'
import { endLease, findJob, findLease, getLease, getJob, moveJob, notActive, recordJobEvent } from '../store/rows'

/** A denied requester retries exactly once, this long after the denial (the files contract: "exactly 3 minutes"). */
export const FILE_RETRY_MS = 180 * SECOND
/** An owner that neither acquires nor heartbeats a file for this long loses it (stop-idle). */
export const FILE_IDLE_MS = 30 * SECOND
/**
 * How long a file an operator's force release took stays kept for the halted requester (see
 * {@link liveHandovers}). No longer than the one retry: an owner refused meanwhile finds the
 * handover over by its retry, and is never halted on a file nobody holds.
 */
export const FILE_HANDOVER_MS = FILE_RETRY_MS

/**
 * How often a worker is to heartbeat a job (the worker API's `heartbeat_interval_seconds`): every
 * third of its lease's TTL, and at least every third of {@link FILE_IDLE_MS}. A job's heartbeat
 * does not keep its files: Leasehold's workers heartbeat each file a job holds after each of the
 * job's heartbeats, and a file not heartbeated for that window is released. A longer lease must
 * not let a running job's files go, for another job to write.
 */
export function heartbeatIntervalS(ttlS: number): number {
  return Math.max(1, Math.floor(Math.min(ttlS, FILE_IDLE_MS / 1000) / 3))
}

export interface FileLeaseRequest {
  file: string
  owner_id: string
  /** The job lease the file lease is held under; the owner is alive while it is ACTIVE. */
  lease_id?: string | null
}

export type AcquireResult =
  | { granted: true; file_lease: FileLeaseRow }
  | { granted: false; code: Extract<AcquireRefusalCode, 'file_lease_held'>; contention: Contention }
  | { granted: false; code: Extract<AcquireRefusalCode, 'blocked'>; blocker: BlockerRow }

const activeOn = (ctx: EngineContext, file: string) =>
  ctx.one<FileLeaseRow>("SELECT * FROM file_leases WHERE file = ? AND state = 'ACTIVE'", file)

/** A few at a time: dead holders among them are reclaimed before the next are read. */
const CONFLICT_BATCH = 32

/**
 * The live lease another owner holds on this file, on a folder above it, or on a path inside it
 * (a lease on a folder covers everything under it: a recursive rm or a rename of the folder
 * changes those files too), or undefined when there is none. Leases of dead owners met on the
 * way are reclaimed, with the evidence. The requester's own leases never conflict with it.
 * Ancestors are O(depth) lookups, descendants one range of the unique index on ACTIVE keys.
 */
function liveConflict(ctx: EngineContext, file: string, ownerId: string, requesterLease: LeaseRow | null, now: number): FileLeaseRow | undefined {
  const others = "state = 'ACTIVE' AND NOT (owner_id = ? AND (? IS NULL OR lease_id IS ?))"
  const own = [ownerId, requesterLease?.id ?? null, requesterLease?.id ?? null]
  const [from, to] = keysBelow(file)
  const reads = [
    () => ctx.all<FileLeaseRow>(`SELECT * FROM file_leases WHERE file IN (SELECT value FROM json_each(?)) AND ${others} ORDER BY length(file) DESC`, JSON.stringify(keysAbove(file)), ...own),
    () => ctx.all<FileLeaseRow>(`SELECT * FROM file_leases WHERE file >= ? AND file < ? AND ${others} ORDER BY file LIMIT ${CONFLICT_BATCH}`, from, to, ...own),
  ]
  for (const read of reads) {
    for (let leases = read(); leases.length > 0; leases = read()) {
      for (const lease of leases) {
        const death = deadBecause(ctx, lease, now)
        if (!death) return lease
        endFileLease(ctx, lease, 'RELEASED', 'reclaimed', { because: death.because, reclaimed_by: ownerId, at: now, ...death.evidence })
      }
    }
  }
  return undefined
}

function ageS(since: number, now: number): number {
  return Math.round((now - since) / 100) / 10
}

/** Why an owner is not alive, with the timestamps that show it (for the event that ends its lease). */
interface Death {
  because: 'idle' | 'owner_lease_ended'
  evidence: Record<string, unknown>
}

/**
 * Why the holder of a file lease is no longer alive, or null while it is: it went idle for
 * {@link FILE_IDLE_MS}, or the job lease it is held under is no longer ACTIVE. Conservative:
 * an owner counts as alive until one of these is certain.
 */
function deadBecause(ctx: EngineContext, holder: FileLeaseRow, now: number): Death | null {
  if (now - holder.last_heartbeat_at >= FILE_IDLE_MS) return { because: 'idle', evidence: { idle_ms: now - holder.last_heartbeat_at } }
  if (holder.lease_id !== null) {
    const lease = findLease(ctx, holder.lease_id)
    if (!lease || lease.state !== 'ACTIVE' || lease.expires_at <= now) {
      const owner_lease = lease
        ? { lease_id: lease.id, state: lease.state, expires_at: lease.expires_at, last_heartbeat_at: lease.last_heartbeat_at, released_at: lease.released_at }
        : { lease_id: holder.lease_id, state: null }
      return { because: 'owner_lease_ended', evidence: { owner_lease } }
    }
  }
  return null
}

/**
 * The owner itself calls (acquire or heartbeat) on a lease whose owner already counts as dead:
 * the lease ends as the reaper would have ended it, so the answer never depends on whether the
 * reaper got there first.
 */
function endDeadOwn(ctx: EngineContext, lease: FileLeaseRow, death: Death): void {
  endFileLease(ctx, lease, 'RELEASED', death.because === 'idle' ? 'idle' : 'owner_lease_expired', { because: death.because, at: ctx.clock.now(), ...death.evidence })
}

function endFileLease(ctx: EngineContext, lease: FileLeaseRow, state: 'RELEASED' | 'REVOKED', reason: FileReleaseReason, evidence: Record<string, unknown> = {}): void {
  ctx.run('UPDATE file_leases SET state = ?, released_at = ?, release_reason = ? WHERE id = ?', state, ctx.clock.now(), reason, lease.id)
  const data = { file: lease.file, owner_id: lease.owner_id, reason, acquired_at: lease.acquired_at, last_heartbeat_at: lease.last_heartbeat_at, ...evidence }
  const type = state === 'REVOKED' ? 'FILE_LEASE_REVOKED' : 'FILE_LEASE_RELEASED'
  if (lease.job_id === null) ctx.appendEvent('FILE_LEASE', lease.id, type, data)
  else recordJobEvent(ctx, lease.job_id, { type, entity: 'FILE_LEASE', entityId: lease.id, data })
}

/**
 * Acquires a file for an owner. Free (or held by a dead owner, reclaimed with the evidence in
 * an event): granted. Held by a live owner: denied with a contention heartbeat event and one
 * retry fixed at denied_at + 180 s; an earlier acquire by the same requester is 429
 * `retry_too_early`; the acquire at or after the retry is granted if the file is free, else
 * the requester is halted with a blocker report (its job goes BLOCKED and gives its capacity back).
 */
export function acquireFile(ctx: EngineContext, request: FileLeaseRequest): AcquireResult {
  const file = fileKey(request.file)
  return ctx.transact((): AcquireResult => {
    const now = ctx.clock.now()
    const requesterLease = request.lease_id ? checkRequesterLease(ctx, request.lease_id) : null
    if (!requesterLease) checkNotTakenBack(ctx, file, request.owner_id)
    const own = activeOn(ctx, file)
    if (own && isRequesters(own, request.owner_id, requesterLease)) {
      const death = deadBecause(ctx, own, now)
      // The holder's re-acquire counts as a heartbeat, even while another job sharing its owner id
      // waits for its retry of this file (that retry is keyed by the owner id alone).
      if (!death) {
        ctx.run('UPDATE file_leases SET last_heartbeat_at = ? WHERE id = ?', now, own.id)
        return { granted: true, file_lease: { ...own, last_heartbeat_at: now } }
      }
      endDeadOwn(ctx, own, death)
    }
    const holder = liveConflict(ctx, file, request.owner_id, requesterLease, now)
    const handovers = holder ? [] : liveHandovers(ctx, file, now)
    const handover = handovers.find((h) => !handedTo(h, request.owner_id, requesterLease))
    const contention = ctx.one<FileContentionRow>('SELECT * FROM file_contentions WHERE file = ? AND owner_id = ?', file, request.owner_id)
    // The file a force release handed to this requester is its to take at once: a retry it still
    // waits for (it asked again after its halt, say) must not keep everyone from the file.
    const takesHandover = handovers.some((h) => handedTo(h, request.owner_id, requesterLease) && covers(file, h.file))
    if (contention && now < contention.retry_at && !takesHandover) {
      throw new EngineError('retry_too_early', `The one retry for ${file} is at ${new Date(contention.retry_at).toISOString()}`, {
        retry_at: contention.retry_at,
        retry_after_s: Math.ceil((contention.retry_at - now) / 1000),
      })
    }
    if (handover) {
      // Refused afresh, even at its retry: the handover lapses before the new retry is due.
      return { granted: false, code: 'file_lease_held', contention: deny(ctx, file, request.owner_id, handoverRefusal(handover, now), requesterLease) }
    }
    if (!holder) {
      if (contention) ctx.run('DELETE FROM file_contentions WHERE file = ? AND owner_id = ?', file, request.owner_id)
      // A handover of this path or of one inside it left now is the requester's own, or lapsed: it
      // is done, as the requester holds that path (a lease on a folder covers everything under it).
      const [from, to] = keysBelow(file)
      ctx.run('DELETE FROM file_handovers WHERE file = ? OR (file >= ? AND file < ?)', file, from, to)
      const granted: FileLeaseRow = {
        id: newId(),
        file,
        owner_id: request.owner_id,
        lease_id: requesterLease?.id ?? null,
        job_id: requesterLease?.job_id ?? null,
        state: 'ACTIVE',
        acquired_at: now,
        last_heartbeat_at: now,
        released_at: null,
        release_reason: null,
      }
      noteFileUnderJobLease(ctx, granted.lease_id)
      ctx
        .stmt(
          `INSERT INTO file_leases (id, file, owner_id, lease_id, job_id, state, acquired_at, last_heartbeat_at, released_at, release_reason)
           VALUES (@id, @file, @owner_id, @lease_id, @job_id, @state, @acquired_at, @last_heartbeat_at, @released_at, @release_reason)`,
        )
        .run(granted)
      const data = { file, owner_id: granted.owner_id, lease_id: granted.lease_id }
      if (granted.job_id === null) ctx.appendEvent('FILE_LEASE', granted.id, 'FILE_LEASE_ACQUIRED', data)
      else recordJobEvent(ctx, granted.job_id, { type: 'FILE_LEASE_ACQUIRED', entity: 'FILE_LEASE', entityId: granted.id, data })
      return { granted: true, file_lease: granted }
    }
    if (contention) return { granted: false, code: 'blocked', blocker: halt(ctx, contention, holder, requesterLease) }
    return { granted: false, code: 'file_lease_held', contention: deny(ctx, file, request.owner_id, leaseRefusal(holder, now), requesterLease) }
  })
}

/**
 * The live handovers of this path, of a folder above it and of paths inside it, oldest first. An
 * operator's force release answers a halted requester: the file it took goes to that requester
 * (see {@link handedTo}), and every other owner — the one it was taken from included — is refused
 * it until the requester acquires it (or a folder above it), its job ends, or
 * {@link FILE_HANDOVER_MS} pass. Otherwise the old holder, still running, would take it straight back.
 *
 * A handover to a job that has ended (done, failed, timed out, canceled, or deleted) is over: that
 * job will never take the file. It is told here, where handovers are read, and not as each job
 * ends: every job's end would then pay a statement for the few that were ever handed a file.
 */
function liveHandovers(ctx: EngineContext, file: string, now: number): FileHandoverRow[] {
  const [from, to] = keysBelow(file)
  const handovers = ctx.all<FileHandoverRow>(
    'SELECT * FROM file_handovers WHERE (file IN (SELECT value FROM json_each(?)) OR (file >= ? AND file < ?)) AND until > ? ORDER BY handed_at',
    JSON.stringify(keysAbove(file)),
    from,
    to,
    now,
  )
  return handovers.filter((handover) => handover.job_id === null || !jobEnded(ctx, handover.job_id))
}

/** Whether the job has come to its end: a terminal state, or no longer stored. */
function jobEnded(ctx: EngineContext, jobId: string): boolean {
  const job = findJob(ctx, jobId)
  return job === undefined || TERMINAL_STATES.has(job.state as JobState)
}

/** Whether a handover is to this requester: its owner id, and the halted job when the report named one, in any attempt. */
function handedTo(handover: FileHandoverRow, ownerId: string, requesterLease: LeaseRow | null): boolean {
  return handover.owner_id === ownerId && (handover.job_id === null || requesterLease === null || handover.job_id === requesterLease.job_id)
}

/** Whether a lease on `key` covers `file`: the same path, or a folder above it. */
function covers(key: string, file: string): boolean {
  return file === key || file.startsWith(keysBelow(key)[0])
}

/** Hands the file a force release took to the requester whose halt it answered (see {@link liveHandovers}). */
function handOver(ctx: EngineContext, blocker: BlockerRow, taken: FileLeaseRow): void {
  const now = ctx.clock.now()
  ctx.run(
    'INSERT OR REPLACE INTO file_handovers (file, owner_id, job_id, blocker_id, file_lease_id, handed_at, until) VALUES (?, ?, ?, ?, ?, ?, ?)',
    blocker.file,
    blocker.requester_owner_id,
    blocker.requester_job_id,
    blocker.id,
    taken.id,
    now,
    now + FILE_HANDOVER_MS,
  )
}

/** What refused an acquire: the holder as the contention names it, the file lease the event is about, and a handover if it was one. */
interface Refusal {
  holder: Contention['holder']
  fileLeaseId: string
  handedOver: Contention['handed_over']
}

const leaseRefusal = (holder: FileLeaseRow, now: number): Refusal => ({
  holder: { file: holder.file, owner_id: holder.owner_id, job_id: holder.job_id, acquired_at: holder.acquired_at, age_s: ageS(holder.acquired_at, now) },
  fileLeaseId: holder.id,
  handedOver: null,
})

const handoverRefusal = (handover: FileHandoverRow, now: number): Refusal => ({
  holder: { file: handover.file, owner_id: handover.owner_id, job_id: handover.job_id, acquired_at: handover.handed_at, age_s: ageS(handover.handed_at, now) },
  fileLeaseId: handover.file_lease_id,
  handedOver: { blocker_id: handover.blocker_id, expires_at: handover.until },
})

/**
 * Whether the file lease is the requester's own. An acquire naming a job lease owns only the
 * file lease acquired under that job lease: another job (or no job) sharing its owner id holds
 * the file as any other owner would, or two jobs would write it at once. An acquire naming none
 * speaks for the owner id alone (the files contract), as a heartbeat or release naming none does.
 */
function isRequesters(holder: FileLeaseRow, ownerId: string, requesterLease: LeaseRow | null): boolean {
  if (holder.owner_id !== ownerId) return false
  return requesterLease === null || holder.lease_id === requesterLease.id
}

/**
 * A file lease named under a job lease is a write under that lease: fenced like any other. A job
 * lease an operator took a file from (force_release) takes no file at all: it can no longer
 * succeed, and taking the file back would leave the requeued requester meeting it again.
 */
function checkRequesterLease(ctx: EngineContext, leaseId: string): LeaseRow {
  const lease = getLease(ctx, leaseId)
  if (lease.state !== 'ACTIVE' || lease.expires_at <= ctx.clock.now()) {
    throw notActive(lease.state === 'ACTIVE' ? { ...lease, state: 'EXPIRED' } : lease)
  }
  if (hasRevokedFiles(ctx, leaseId)) {
    throw new EngineError('file_lease_lost', `An operator took a file from job lease ${leaseId}; it takes no file again (it can only fail or end)`)
  }
  return lease
}

/**
 * An owner an operator took this file from (force_release), whose job lease still runs, may not
 * take it back by leaving its job lease out of the acquire: it would halt the requeued requester
 * a second time, as taking it back under that job lease would (checkRequesterLease).
 */
function checkNotTakenBack(ctx: EngineContext, file: string, ownerId: string): void {
  const newest = ctx.one<FileLeaseRow>('SELECT * FROM file_leases WHERE file = ? AND owner_id = ? ORDER BY acquired_at DESC, rowid DESC LIMIT 1', file, ownerId)
  if (newest?.state !== 'REVOKED' || newest.lease_id === null) return
  const lease = findLease(ctx, newest.lease_id)
  if (lease && lease.state === 'ACTIVE' && lease.expires_at > ctx.clock.now()) {
    throw new EngineError('file_lease_lost', `An operator took ${file} from ${ownerId} under job lease ${lease.id}, which still runs; it takes the file no more`)
  }
}

function deny(ctx: EngineContext, file: string, ownerId: string, refusal: Refusal, requesterLease: LeaseRow | null): Contention {
  const now = ctx.clock.now()
  const retryAt = now + FILE_RETRY_MS
  noteFileUnderJobLease(ctx, requesterLease?.id ?? null)
  ctx.run(
    'INSERT OR REPLACE INTO file_contentions (file, owner_id, lease_id, job_id, holder_file, denied_at, retry_at) VALUES (?, ?, ?, ?, ?, ?, ?)',
    file,
    ownerId,
    requesterLease?.id ?? null,
    requesterLease?.job_id ?? null,
    refusal.holder.file,
    now,
    retryAt,
  )
  const contention: Contention = {
    file,
    holder: refusal.holder,
    handed_over: refusal.handedOver,
    denied_at: now,
    retry_at: retryAt,
  }
  // The contention heartbeat: the denial is visible in the log, with when the one retry is due.
  const data = { ...contention, requester_owner_id: ownerId }
  if (!requesterLease) ctx.appendEvent('FILE_LEASE', refusal.fileLeaseId, 'FILE_LEASE_CONTENDED', data)
  else recordJobEvent(ctx, requesterLease.job_id, { type: 'FILE_LEASE_CONTENDED', entity: 'FILE_LEASE', entityId: refusal.fileLeaseId, data })
  return contention
}

/** Still blocked after the retry: store the report, halt the requester's job, surface it. */
function halt(ctx: EngineContext, contention: FileContentionRow, holder: FileLeaseRow, requesterLease: LeaseRow | null): BlockerRow {
  const now = ctx.clock.now()
  const { seq } = ctx.one<{ seq: number }>('SELECT COALESCE(MAX(seq), 0) + 1 AS seq FROM blockers')!
  const blocker: BlockerRow = {
    id: newId(),
    seq,
    file: contention.file,
    holder_owner_id: holder.owner_id,
    holder_job_id: holder.job_id,
    holder_file: holder.file,
    holder_acquired_at: holder.acquired_at,
    holder_last_heartbeat_at: holder.last_heartbeat_at,
    retry_s: FILE_RETRY_MS / SECOND,
    denied_at: contention.denied_at,
    retried_at: now,
    requester_owner_id: contention.owner_id,
    // The retry's requester: a retry naming no job lease speaks for its owner id alone, and halts
    // no job, so its report names none (whatever job lease the denial came under).
    requester_job_id: requesterLease?.job_id ?? null,
    requester_lease_id: requesterLease?.id ?? null,
    state: 'OPEN',
    resolution: null,
    note: null,
    resolved_by: null,
    resolved_at: null,
    taken_from_holder: null,
    created_at: now,
  }
  ctx
    .stmt(
      `INSERT INTO blockers (id, seq, file, holder_owner_id, holder_job_id, holder_file, holder_acquired_at, holder_last_heartbeat_at,
         retry_s, denied_at, retried_at, requester_owner_id, requester_job_id, requester_lease_id, state, resolution,
         note, resolved_by, resolved_at, taken_from_holder, created_at)
       VALUES (@id, @seq, @file, @holder_owner_id, @holder_job_id, @holder_file, @holder_acquired_at, @holder_last_heartbeat_at,
         @retry_s, @denied_at, @retried_at, @requester_owner_id, @requester_job_id, @requester_lease_id, @state, @resolution,
         @note, @resolved_by, @resolved_at, @taken_from_holder, @created_at)`,
    )
    .run(blocker)
  ctx.run('DELETE FROM file_contentions WHERE file = ? AND owner_id = ?', contention.file, contention.owner_id)
  const opened = {
    file: blocker.file,
    holder_owner_id: blocker.holder_owner_id,
    holder_job_id: blocker.holder_job_id,
    holder_file: holder.file,
    age_s: ageS(blocker.holder_acquired_at, now),
    retry_s: blocker.retry_s,
    denied_at: blocker.denied_at,
    retried_at: now,
    requester_owner_id: blocker.requester_owner_id,
  }
  if (blocker.requester_job_id === null) ctx.appendEvent('BLOCKER', blocker.id, 'BLOCKER_OPENED', opened)
  else recordJobEvent(ctx, blocker.requester_job_id, { type: 'BLOCKER_OPENED', entity: 'BLOCKER', entityId: blocker.id, data: opened })
  if (!requesterLease) return blocker
  const canceled = getJob(ctx, requesterLease.job_id).cancel_requested === 1
  blockLease(ctx, requesterLease, blocker.id, canceled ? 'FINAL' : 'BLOCKED')
  if (!canceled) return blocker
  // A job whose cancel was asked for ends CANCELED as its lease ends (states.md), not BLOCKED
  // waiting for a decision its canceller has made already: its attempt is final, and its report
  // is resolved as a cancel, in the name of whoever asked for it.
  const job = getJob(ctx, requesterLease.job_id)
  const requestedBy = cancelRequestedBy(ctx, job)
  cancelNow(ctx, job, CANCELED_BEFORE_HALT, null, requestedBy)
  closeBlockersOfCanceledJob(ctx, job.id, CANCELED_BEFORE_HALT, requestedBy)
  return ctx.one<BlockerRow>('SELECT * FROM blockers WHERE id = ?', blocker.id)!
}

const CANCELED_BEFORE_HALT = 'its cancel was asked for before the halt'

/** A heartbeat or release: the file, its owner, and (optionally) the job lease it was acquired under. */
export interface FileLeaseRef {
  file: string
  owner_id: string
  lease_id?: string | null
}

/**
 * The file lease a heartbeat or release speaks of: the one acquired under the job lease it names,
 * else the owner's newest on the file. An owner id is often the job's (`job:<id>`), the same in
 * every attempt, so only the job lease tells a stale attempt's release from the current one's.
 */
function ownersLease(ctx: EngineContext, file: string, request: FileLeaseRef): FileLeaseRow {
  const ownerId = request.owner_id
  const lease = request.lease_id
    ? ctx.one<FileLeaseRow>(
        'SELECT * FROM file_leases WHERE file = ? AND owner_id = ? AND lease_id = ? ORDER BY acquired_at DESC, rowid DESC LIMIT 1',
        file,
        ownerId,
        request.lease_id,
      )
    : ctx.one<FileLeaseRow>('SELECT * FROM file_leases WHERE file = ? AND owner_id = ? ORDER BY acquired_at DESC, rowid DESC LIMIT 1', file, ownerId)
  if (!lease) {
    const under = request.lease_id ? ` under job lease ${printable(request.lease_id)}` : ''
    throw new EngineError('file_lease_not_found', `${printable(ownerId)} holds no lease on ${printable(file)}${under}`)
  }
  if (lease.state === 'REVOKED') {
    throw new EngineError('file_lease_lost', `The lease on ${file} was taken from ${ownerId} by an operator; writes under it are refused`)
  }
  return lease
}

/**
 * Keeps a held file lease from going idle. A heartbeat on a lease whose owner already counts
 * as dead (idle 30 s, or its job lease expired) does not revive it, even before the reaper ran:
 * the lease ends (committed) and the answer is 409 `file_lease_not_held`.
 */
export function heartbeatFile(ctx: EngineContext, request: FileLeaseRef): FileLeaseRow {
  const file = fileKey(request.file)
  const outcome = ctx.transact((): { held: boolean; lease: FileLeaseRow } => {
    const lease = ownersLease(ctx, file, request)
    if (lease.state !== 'ACTIVE') return { held: false, lease }
    const now = ctx.clock.now()
    const death = deadBecause(ctx, lease, now)
    if (death) {
      endDeadOwn(ctx, lease, death)
      return { held: false, lease: ctx.one<FileLeaseRow>('SELECT * FROM file_leases WHERE id = ?', lease.id)! }
    }
    ctx.run('UPDATE file_leases SET last_heartbeat_at = ? WHERE id = ?', now, lease.id)
    return { held: true, lease: { ...lease, last_heartbeat_at: now } }
  })
  if (!outcome.held) {
    throw new EngineError('file_lease_not_held', `${request.owner_id} no longer holds ${file} (${outcome.lease.release_reason})`)
  }
  return outcome.lease
}

/**
 * Releases a held file lease; releasing one already released answers the same again. Named by
 * its job lease, a stale attempt's release finds its own (already ended) file lease, never the
 * one the job's next attempt holds.
 */
export function releaseFile(ctx: EngineContext, request: FileLeaseRef): FileLeaseRow {
  const file = fileKey(request.file)
  return ctx.transact(() => {
    const lease = ownersLease(ctx, file, request)
    if (lease.state === 'ACTIVE') endFileLease(ctx, lease, 'RELEASED', 'released')
    return ctx.one<FileLeaseRow>('SELECT * FROM file_leases WHERE id = ?', lease.id)!
  })
}

/**
 * Ends the file leases held under a job lease when that lease ends (the job succeeded,
 * failed, ended, or was halted), and drops its pending retries. Inside the caller's transaction.
 */
export function releaseFilesOfLease(ctx: EngineContext, leaseId: string, reason: FileReleaseReason): void {
  if (!filesTakenUnderJobLeases(ctx)) return
  for (const lease of ctx.all<FileLeaseRow>("SELECT * FROM file_leases WHERE lease_id = ? AND state = 'ACTIVE'", leaseId)) {
    endFileLease(ctx, lease, 'RELEASED', reason)
  }
  ctx.run('DELETE FROM file_contentions WHERE lease_id = ?', leaseId)
}

/**
 * Whether any file lease or contention was ever recorded under a job lease: until one is, the
 * end of every job lease skips the file gate's three probes (most jobs never touch the gate).
 * Read from SQLite once per engine, then only ever set; a set by a write that was rolled back
 * merely costs the probes again.
 */
const filesUnderJobLeases = new WeakMap<EngineContext, boolean>()

function filesTakenUnderJobLeases(ctx: EngineContext): boolean {
  let taken = filesUnderJobLeases.get(ctx)
  if (taken === undefined) {
    taken =
      ctx.one('SELECT 1 FROM file_leases WHERE lease_id IS NOT NULL LIMIT 1') !== undefined ||
      ctx.one('SELECT 1 FROM file_contentions WHERE lease_id IS NOT NULL LIMIT 1') !== undefined
    filesUnderJobLeases.set(ctx, taken)
  }
  return taken
}

function noteFileUnderJobLease(ctx: EngineContext, leaseId: string | null): void {
  if (leaseId !== null) filesUnderJobLeases.set(ctx, true)
}

/** True when an operator took a file from this job lease: its job may not then succeed. */
export function hasRevokedFiles(ctx: EngineContext, leaseId: string): boolean {
  if (!filesTakenUnderJobLeases(ctx)) return false
  return ctx.one("SELECT 1 FROM file_leases WHERE lease_id = ? AND state = 'REVOKED' LIMIT 1", leaseId) !== undefined
}

/** When the next ACTIVE file lease goes idle (see {@link releaseIdleFiles}), or null when none is held. */
export function nextIdleFileAt(ctx: EngineContext): number | null {
  const at = ctx.one<{ at: number | null }>("SELECT MIN(last_heartbeat_at) AS at FROM file_leases WHERE state = 'ACTIVE'")?.at ?? null
  return at === null ? null : at + FILE_IDLE_MS
}

/**
 * After the machine slept (reaper.ts `renewAfterSleep`): every held file lease goes idle
 * {@link FILE_IDLE_MS} from `now`, its `last_heartbeat_at` set to `now`. Inside the caller's
 * transaction; returns how many it renewed.
 */
export function renewFilesAfterSleep(ctx: EngineContext, now: number): number {
  const held = ctx.one<{ n: number }>("SELECT COUNT(*) AS n FROM file_leases WHERE state = 'ACTIVE' AND last_heartbeat_at < ?", now)?.n ?? 0
  if (held > 0) ctx.run("UPDATE file_leases SET last_heartbeat_at = ? WHERE state = 'ACTIVE' AND last_heartbeat_at < ?", now, now)
  return held
}

/**
 * After the wall clock was set back (reaper.ts `reaimAfterSetBack`): no held file lease goes idle
 * later than {@link FILE_IDLE_MS} from `now` (a `last_heartbeat_at` after `now` reads `now`), no
 * denied requester's one retry is further off than {@link FILE_RETRY_MS}, and no handover lasts
 * past {@link FILE_HANDOVER_MS} from `now`. Inside the caller's transaction.
 */
export function reaimFilesAfterSetBack(ctx: EngineContext, now: number): void {
  ctx.run("UPDATE file_leases SET last_heartbeat_at = ? WHERE state = 'ACTIVE' AND last_heartbeat_at > ?", now, now)
  ctx.run('UPDATE file_contentions SET retry_at = ? WHERE retry_at > ?', now + FILE_RETRY_MS, now + FILE_RETRY_MS)
  ctx.run('UPDATE file_handovers SET until = ? WHERE until > ?', now + FILE_HANDOVER_MS, now + FILE_HANDOVER_MS)
}

/** Stop-idle: releases every file lease with no acquire or heartbeat for {@link FILE_IDLE_MS}. */
export function releaseIdleFiles(ctx: EngineContext): number {
  const idleLeases = () =>
    ctx.all<FileLeaseRow>("SELECT * FROM file_leases WHERE state = 'ACTIVE' AND last_heartbeat_at <= ? LIMIT 1000", ctx.clock.now() - FILE_IDLE_MS)
  // Looked for before any transaction: a tick with no file lease gone idle takes no write lock.
  if (idleLeases().length === 0) return 0
  return ctx.transact(() => {
    const idle = idleLeases()
    for (const lease of idle) endFileLease(ctx, lease, 'RELEASED', 'idle')
    return idle.length
  })
}

/**
 * The operator's force release: the holder the blocker report named loses the file; its later
 * writes under it are refused. Only that holder's lease (its owner, acquired when the report
 * says): a report waits for its operator, and a holder that let go meanwhile has nothing to
 * lose, while whoever holds the file now was never shown to the operator. A file taken is
 * handed to the requester whose halt the answer settles (see {@link liveHandovers}). Answers
 * the lease taken, or null when there was none to take.
 */
export function revokeFile(ctx: EngineContext, blocker: BlockerRow, by: string): FileLeaseRow | null {
  const holder = namedHoldersLease(ctx, blocker)
  if (!holder) return null
  endFileLease(ctx, holder, 'REVOKED', 'force_released', { by })
  handOver(ctx, blocker, holder)
  return holder
}

/**
 * At a start: the ACTIVE file leases that overlap one granted before them (a folder and a path
 * inside it, held by another owner or under another job lease) are revoked. Releases before the
 * gate covered folders (migration 0021) granted both; the gate's rule holds for them too from
 * the start on. The lease granted first keeps its path; each later one that overlaps a lease kept
 * ends REVOKED (`overlapped`, its event naming the lease it overlapped), so that its holder's next
 * write under it is refused (`file_lease_lost`), as after an operator's force release. A lease
 * whose owner is no longer alive holds nothing, keeps nothing from another, and is left to the
 * reaper. Reads the ACTIVE file leases only; answers those revoked.
 */
export function revokeOverlappingFiles(ctx: EngineContext): { revoked: FileLeaseRow; kept: FileLeaseRow }[] {
  return ctx.transact(() => {
    const now = ctx.clock.now()
    const held = ctx.all<FileLeaseRow>("SELECT * FROM file_leases WHERE state = 'ACTIVE' ORDER BY acquired_at, rowid")
    /** The leases kept, by their path; and by each folder above their path, the leases kept inside it. */
    const keptOn = new Map<string, FileLeaseRow>()
    const keptInside = new Map<string, FileLeaseRow[]>()
    const revoked: { revoked: FileLeaseRow; kept: FileLeaseRow }[] = []
    for (const lease of held) {
      if (deadBecause(ctx, lease, now)) continue
      const [, ...folders] = keysAbove(lease.file)
      const candidates = [...folders.flatMap((folder) => keptOn.get(folder) ?? []), ...(keptInside.get(lease.file) ?? [])]
      // An owner's own leases never conflict: the same owner under the same job lease (or none).
      const kept = candidates.find((other) => other.owner_id !== lease.owner_id || other.lease_id !== lease.lease_id)
      if (kept) {
        const overlapped = { file_lease_id: kept.id, file: kept.file, owner_id: kept.owner_id, job_id: kept.job_id, acquired_at: kept.acquired_at }
        endFileLease(ctx, lease, 'REVOKED', 'overlapped', { overlapped })
        revoked.push({ revoked: lease, kept })
        continue
      }
      keptOn.set(lease.file, lease)
      for (const folder of folders) {
        const inside = keptInside.get(folder)
        if (inside) inside.push(lease)
        else keptInside.set(folder, [lease])
      }
    }
    return revoked
  })
}

/** The holder a blocker report names: the path it held, and who (which job) took it when. */
type NamedHolder = Pick<BlockerRow, 'file' | 'holder_file' | 'holder_owner_id' | 'holder_job_id' | 'holder_acquired_at'>

/**
 * The file lease of the holder a blocker report names, while it holds the path it held: that
 * path's ACTIVE lease, taken by the same owner at the same moment, or — a report naming a job —
 * by the same owner under any lease of that job. A job whose attempt ended (its worker killed,
 * say) and that took the file again under its next attempt is the holder the operator was
 * shown, holding it still; an owner naming no job that let go and took it again is not.
 */
export function namedHoldersLease(ctx: EngineContext, named: NamedHolder): FileLeaseRow | null {
  const holder = activeOn(ctx, named.holder_file ?? named.file)
  if (!holder || holder.owner_id !== named.holder_owner_id) return null
  const sameLease = holder.acquired_at === named.holder_acquired_at
  return sameLease || (named.holder_job_id !== null && holder.job_id === named.holder_job_id) ? holder : null
}

/** When the requester's one retry of a file is due, or null if it has no pending retry. */
export function fileRetryAt(ctx: EngineContext, file: string, ownerId: string): number | null {
  return ctx.one<{ retry_at: number }>('SELECT retry_at FROM file_contentions WHERE file = ? AND owner_id = ?', fileKey(file), ownerId)?.retry_at ?? null
}

export function listFileLeases(ctx: EngineContext, state: 'ACTIVE' | 'RELEASED' | 'REVOKED' | null, page: PageRequest = {}): { file_leases: FileLeaseRow[]; next_cursor: string | null } {
  const limit = pageLimit(page, MAX_LIST_LIMIT)
  const where: string[] = []
  const params: (string | number)[] = []
  if (state !== null) {
    where.push('state = ?')
    params.push(state)
  }
  if (page.cursor !== undefined) {
    const [, at, row] = decodeCursor(page.cursor, FILE_LEASE_CURSOR).map(Number)
    where.push('(acquired_at < ? OR (acquired_at = ? AND rowid < ?))')
    params.push(at!, at!, row!)
  }
  const rows = ctx.all<FileLeaseRow & { row: number }>(
    `SELECT rowid AS row, * FROM file_leases ${where.length > 0 ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY acquired_at DESC, rowid DESC LIMIT ?`,
    ...params,
    limit + 1,
  )
  const last = rows.length > limit ? rows[limit - 1]! : null
  return { file_leases: rows.slice(0, limit), next_cursor: last && encodeCursor(`acquired:${last.acquired_at}:${last.row}`) }
}

/** A page of file leases ends at a lease's acquired_at and rowid (its key among leases acquired in one millisecond). */
const FILE_LEASE_CURSOR = /^acquired:(\d{1,15}):(\d{1,15})$/

/**
 * Halts the job of a lease on a blocker (inside the caller's transaction): the lease is
 * released so its capacity comes back, the attempt ends BLOCKED, the files held under it are
 * released, and the job waits in BLOCKED for an operator. Its disposition is FINAL when the job
 * ends CANCELED at once instead (its cancel was asked for before the halt).
 */
export function blockLease(ctx: EngineContext, lease: LeaseRow, blockerId: string, disposition: 'BLOCKED' | 'FINAL' = 'BLOCKED'): void {
  endLease(ctx, lease, 'RELEASED', 'BLOCKED', disposition, { code: 'blocked', message: 'Halted by a file-lease blocker', blocker_id: blockerId })
  releaseFilesOfLease(ctx, lease.id, 'job_blocked')
  const job = getJob(ctx, lease.job_id) // its message is acknowledged: an operator's retry gives it a new one
  // Progress and note were told of the attempt that ended (as on a requeue): its note ("acquiring …") is not why it waits now.
  moveJob(ctx, job, 'BLOCKED', NOTHING_SAID, { type: 'JOB_BLOCKED', data: { state: 'BLOCKED', blocker_id: blockerId, lease_id: lease.id } })
}

/**
 * A BLOCKED job canceled directly closes its open blockers (inside the cancel's transaction),
 * resolved by whoever asked for the cancel ({@link answeredBy}), as for an answer to the blocker itself.
 */
export function closeBlockersOfCanceledJob(ctx: EngineContext, jobId: string, reason: string | null, by: string | null): void {
  for (const blocker of ctx.all<BlockerRow>("SELECT * FROM blockers WHERE requester_job_id = ? AND state = 'OPEN'", jobId)) {
    closeBlocker(ctx, blocker, { action: 'cancel', note: reason, by: answeredBy(by), taken: null })
  }
}

/** An answer that closes a blocker; `taken`, for a force release, whether the holder the report names still held the file (null for the other answers). */
export interface BlockerClosing {
  action: Resolution
  note: string | null
  by: string
  taken: boolean | null
}

/** Marks an open blocker RESOLVED with its answer (inside the caller's transaction), with its BLOCKER_RESOLVED event. */
export function closeBlocker(ctx: EngineContext, blocker: BlockerRow, { action, note, by, taken }: BlockerClosing): void {
  ctx.run(
    "UPDATE blockers SET state = 'RESOLVED', resolution = ?, note = ?, resolved_by = ?, resolved_at = ?, taken_from_holder = ? WHERE id = ?",
    action,
    note,
    by,
    ctx.clock.now(),
    taken === null ? null : taken ? 1 : 0,
    blocker.id,
  )
  // A force release says whether the holder still held the file, and so lost it.
  const resolved = { action, note, by, file: blocker.file, ...(taken === null ? {} : { taken_from_holder: taken }) }
  if (blocker.requester_job_id === null) ctx.appendEvent('BLOCKER', blocker.id, 'BLOCKER_RESOLVED', resolved)
  else recordJobEvent(ctx, blocker.requester_job_id, { type: 'BLOCKER_RESOLVED', entity: 'BLOCKER', entityId: blocker.id, data: resolved })
}
