import type { AcquireResult } from '../engine'

/**
 * The file gate's decision in the worker runtime's terms, for the local workers' IPC. (Claims and
 * exchanges are answered over IPC as the worker API answers them: src-main/http/views/worker.ts.)
 */
export function acquireAnswer(result: AcquireResult) {
  if (result.granted) return { granted: true as const }
  if (result.code === 'file_lease_held') {
    return { granted: false as const, code: 'file_lease_held' as const, retry_at: new Date(result.contention.retry_at).toISOString(), holder: result.contention.holder }
  }
  return { granted: false as const, code: 'blocked' as const, blocker: { blocker_id: result.blocker.id, file: result.blocker.file } }
}
