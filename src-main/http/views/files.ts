/**
 * the files API (file leases and blockers) as the wire shows it. Each view's zod schema sits beside
 * the function that renders it; the acquire's refusals (409 held or blocked, 429 too early) have
 * schemas of their own.
 */
import { z } from 'zod'
import { type AcquireResult, type Blocker as BlockerReport, BLOCKER_STATES, type Contention, type FileLease as FileLeaseRecord, FILE_LEASE_STATES, RESOLUTIONS } from '../../engine'
import { iso } from '../../engine/rules/clock'
import { heldPath } from '../../../src-shared/file-owner'
import { FILE_RELEASE_REASONS } from '../../engine/rules/file-leases'
import { IsoTime, JobState, NextCursor } from '../schemas'

const ageS = (since: number, now: number) => Math.round((now - since) / 100) / 10

export const FileLease = z
  .object({
    file_lease_id: z.string(),
    file: z.string().meta({ description: "The file's normalized absolute path" }),
    owner_id: z.string(),
    lease_id: z.string().nullable().meta({ description: 'The job lease it is held under, if any' }),
    job_id: z.string().nullable(),
    state: z.enum(FILE_LEASE_STATES).meta({ description: "REVOKED: taken by an operator's force release" }),
    acquired_at: IsoTime,
    last_heartbeat_at: IsoTime,
    age_s: z.number().meta({ description: 'Seconds it has been held (one decimal): until now while ACTIVE, until its release once it ended' }),
    released_at: IsoTime.nullable(),
    release_reason: z.string().nullable().meta({ description: `Why it ended: ${FILE_RELEASE_REASONS.join(', ')} (docs/file-leases.md)` }),
  })
  .meta({ id: 'FileLease' })
export type FileLease = z.infer<typeof FileLease>

export function fileLeaseView(lease: FileLeaseRecord, now: number): FileLease {
  return {
    file_lease_id: lease.id,
    file: lease.file,
    owner_id: lease.owner_id,
    lease_id: lease.lease_id,
    job_id: lease.job_id,
    state: lease.state,
    acquired_at: iso(lease.acquired_at),
    last_heartbeat_at: iso(lease.last_heartbeat_at),
    age_s: ageS(lease.acquired_at, lease.released_at ?? now),
    released_at: iso(lease.released_at),
    release_reason: lease.release_reason,
  }
}

export const FileContention = z
  .object({
    file: z.string(),
    holder: z.object({
      file: z.string().meta({ description: 'The path the holder holds: the file, a folder above it, or a path inside it (a lease on a folder covers everything under it)' }),
      owner_id: z.string(),
      job_id: z.string().nullable(),
      acquired_at: IsoTime,
      age_s: z.number(),
    }),
    handed_over: z
      .object({ blocker_id: z.string(), expires_at: IsoTime.meta({ description: 'When the handover lapses if that requester has not acquired the file by then' }) })
      .nullable()
      .meta({
        description:
          "Set when an operator's force release handed the path to a halted requester (the holder above, acquired_at when it was handed over): every other owner is refused it until that requester acquires it or the handover lapses",
      }),
    denied_at: IsoTime,
    retry_at: IsoTime.meta({ description: 'The one retry: denied_at + 180 s' }),
  })
  .meta({ id: 'FileContention' })
export type FileContention = z.infer<typeof FileContention>

export function contentionView(c: Contention): FileContention {
  return {
    file: c.file,
    holder: { ...c.holder, acquired_at: iso(c.holder.acquired_at) },
    handed_over: c.handed_over && { blocker_id: c.handed_over.blocker_id, expires_at: iso(c.handed_over.expires_at) },
    denied_at: iso(c.denied_at),
    retry_at: iso(c.retry_at),
  }
}

/** The blocker report: the file, who holds it and for how long, the retry, who was halted. */
export const Blocker = z
  .object({
    blocker_id: z.string(),
    file: z.string(),
    holder: z.object({
      file: z.string().meta({ description: 'The path the holder held: the file, a folder above it, or a path inside it (a lease on a folder covers everything under it)' }),
      owner_id: z.string(),
      job_id: z.string().nullable(),
      acquired_at: IsoTime,
      last_heartbeat_at: IsoTime,
      holds_now: z.boolean().meta({
        description: 'Whether this holder holds the file as the report is read — under the lease the report names, or its job under a later attempt (holds_again): false once it let go, or lost it to a force_release',
      }),
      holds_again: z.boolean().meta({ description: "Whether the holder's job holds the file again, under a new attempt's lease, having let it go (a force_release takes it from that lease)" }),
      held_s: z.number().nullable().meta({ description: 'While it holds the file, how long it has held it (under its current lease) as the report is read (one decimal); null once it let go' }),
    }),
    age_s: z.number().meta({ description: 'How long the holder had held the file when the retry was refused (the report keeps the halt as it was; holder.held_s is now)' }),
    retry_s: z.number().int(),
    denied_at: IsoTime,
    retried_at: IsoTime,
    requester: z.object({ owner_id: z.string(), job_id: z.string().nullable(), lease_id: z.string().nullable() }),
    state: z.enum(BLOCKER_STATES),
    resolution: z.enum(RESOLUTIONS).nullable(),
    note: z.string().nullable(),
    resolved_by: z.string().nullable(),
    resolved_at: IsoTime.nullable(),
    taken_from_holder: z.boolean().nullable().meta({
      description: 'Answered force_release: whether the holder the report names still held the file and lost it (false: it had let go, nothing was taken); null otherwise (and for a force release answered before the host kept it, whose event the retention removed)',
    }),
    created_at: IsoTime,
  })
  .meta({ id: 'Blocker', description: 'A blocker report: a job still blocked after its retry, halted until an operator answers' })
export type Blocker = z.infer<typeof Blocker>

/** A report as read at `now`: the halt as it was, and its holder as it is now. */
export function blockerView(b: BlockerReport, now: number): Blocker {
  return {
    blocker_id: b.id,
    file: b.file,
    holder: {
      file: b.holder_file,
      owner_id: b.holder_owner_id,
      job_id: b.holder_job_id,
      acquired_at: iso(b.holder_acquired_at),
      last_heartbeat_at: iso(b.holder_last_heartbeat_at),
      holds_now: b.holder_holds_now,
      holds_again: b.holder_holds_since !== null && b.holder_holds_since !== b.holder_acquired_at,
      held_s: b.holder_holds_since === null ? null : ageS(b.holder_holds_since, now),
    },
    age_s: ageS(b.holder_acquired_at, b.retried_at),
    retry_s: b.retry_s,
    denied_at: iso(b.denied_at),
    retried_at: iso(b.retried_at),
    requester: { owner_id: b.requester_owner_id, job_id: b.requester_job_id, lease_id: b.requester_lease_id },
    state: b.state,
    resolution: b.resolution,
    note: b.note,
    resolved_by: b.resolved_by,
    resolved_at: iso(b.resolved_at),
    taken_from_holder: b.taken_from_holder,
    created_at: iso(b.created_at),
  }
}

// ---------------------------------------------------------------------------------------------
// The answers of the routes

export const FileLeaseGranted = z.object({ granted: z.literal(true), file_lease: FileLease }).meta({ id: 'FileLeaseGranted' })
export type FileLeaseGranted = z.infer<typeof FileLeaseGranted>

/** 409 `file_lease_held`: denied, with the one retry fixed at `contention.retry_at`. */
export const FileLeaseHeld = z
  .object({ granted: z.literal(false), code: z.literal('file_lease_held'), detail: z.string(), contention: FileContention })
  .meta({ id: 'FileLeaseHeld', description: 'Denied: another owner holds the file; retry once at contention.retry_at' })
export type FileLeaseHeld = z.infer<typeof FileLeaseHeld>

/** 409 `blocked`: still held at the retry, so the requester is halted with a blocker report. */
export const FileBlocked = z
  .object({ granted: z.literal(false), code: z.literal('blocked'), detail: z.string(), blocker: Blocker })
  .meta({ id: 'FileBlocked', description: 'Still held at the retry: the requester is halted (its job is BLOCKED) with this report' })
export type FileBlocked = z.infer<typeof FileBlocked>

/** The acquire's 409s that carry more than `{detail, code}`. */
export const FileAcquireRefusal = z.union([FileLeaseHeld, FileBlocked])
export type FileAcquireRefusal = z.infer<typeof FileAcquireRefusal>

/**
 * "/data/a.txt is held by w1", or kept for the requester a force release handed it to. A path
 * refused for a file kept so (a folder above it, a path inside it) names that file: the
 * requester holds nothing until it acquires it.
 */
function refusedBecause({ file, holder, handed_over }: Contention): string {
  if (!handed_over) return `${file} is held by ${holder.owner_id}${heldPath(file, holder.file)}`
  const kept = holder.file === file ? file : `${file} is refused while ${holder.file}`
  return `${kept} is kept for ${holder.owner_id}, to whom an operator's force release handed it (blocker ${handed_over.blocker_id}), until it acquires it or until ${iso(handed_over.expires_at)}`
}

export function acquireRefusal(refusal: Extract<AcquireResult, { granted: false }>): FileAcquireRefusal {
  if (refusal.code === 'file_lease_held') {
    const { contention } = refusal
    return { granted: false, code: 'file_lease_held', detail: refusedBecause(contention), contention: contentionView(contention) }
  }
  return { granted: false, code: 'blocked', detail: `Still blocked on ${refusal.blocker.file} after the retry: halted`, blocker: blockerView(refusal.blocker, refusal.blocker.retried_at) }
}

/** 429 `retry_too_early`: the one retry is later (also said in Retry-After). */
export const RetryTooEarly = z
  .object({
    detail: z.string(),
    code: z.literal('retry_too_early'),
    retry_at: IsoTime,
    retry_after_s: z.number().int().meta({ description: 'Seconds until retry_at, as the Retry-After header says' }),
  })
  .meta({ id: 'RetryTooEarly' })

export const FileRetryWaitAnswer = z
  .object({
    ready: z.boolean().meta({ description: 'The retry may be made now; false when the wait ended first' }),
    retry_at: IsoTime.nullable().meta({ description: 'null: no retry pending for this owner and file' }),
  })
  .meta({ id: 'FileRetryWaitAnswer' })
export type FileRetryWaitAnswer = z.infer<typeof FileRetryWaitAnswer>

export const FileLeaseAnswer = z.object({ ok: z.literal(true), file_lease: FileLease }).meta({ id: 'FileLeaseAnswer' })
export type FileLeaseAnswer = z.infer<typeof FileLeaseAnswer>

export const FileLeaseListAnswer = z.object({ file_leases: z.array(FileLease), next_cursor: NextCursor }).meta({ id: 'FileLeaseList' })
export const BlockerListAnswer = z.object({ blockers: z.array(Blocker), next_cursor: NextCursor }).meta({ id: 'BlockerList' })
export const BlockerAnswer = z.object({ blocker: Blocker }).meta({ id: 'BlockerAnswer' })

export const BlockerResolved = z
  .object({
    blocker: Blocker,
    job_state: JobState.nullable().meta({ description: "The halted job's canonical state after the answer" }),
    taken_from_holder: z.boolean().nullable().meta({
      description: 'force_release: whether the holder the report names still held the file and lost it (false: it had let go, nothing was taken); null for retry and cancel',
    }),
  })
  .meta({ id: 'BlockerResolved' })
export type BlockerResolved = z.infer<typeof BlockerResolved>
