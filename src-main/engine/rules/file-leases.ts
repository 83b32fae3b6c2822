/**
 * A file lease refused because another owner holds the file, a folder above it or a path inside
 * it (verbs/files.ts): which path, who holds it, and when the one retry is due.
 */
export interface Contention {
  file: string
  holder: { file: string; owner_id: string; job_id: string | null; acquired_at: number; age_s: number }
  /**
   * Set when no lease refused it but an operator's force release handed the path to another
   * (the holder is then that requester, `acquired_at` when it was handed over): the blocker
   * answered, and when the handover lapses if that requester has not acquired it by then.
   */
  handed_over: { blocker_id: string; expires_at: number } | null
  denied_at: number
  retry_at: number
}

/**
 * Why a file lease ended: its owner released it; it went `idle` (30 s without an acquire or
 * heartbeat); the next acquire `reclaimed` it from a dead owner; its job lease ended — the job
 * succeeded, failed, ended otherwise (cancel, timeout), its lease expired, or it was halted on a
 * blocker; or an operator took it (`force_released`, the lease REVOKED); or, at a start, it
 * overlapped a lease granted before it, as releases before the gate covered folders granted
 * (`overlapped`, the lease REVOKED).
 */
export const FILE_RELEASE_REASONS = ['released', 'idle', 'reclaimed', 'job_succeeded', 'job_failed', 'job_ended', 'owner_lease_expired', 'job_blocked', 'force_released', 'overlapped'] as const
export type FileReleaseReason = (typeof FILE_RELEASE_REASONS)[number]
