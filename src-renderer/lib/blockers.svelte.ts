import { eventMoves } from '../../src-shared/event-types'
import { ApiError, describeError, overtaken, type ApiClient, type Blocker, type BlockerAction, type LogEvent } from './api'

/** Each answer in the words of its button, as a resolved card shows the answer given. */
export const ANSWER_WORDS: Readonly<Record<BlockerAction, string>> = { retry: 'Retry', force_release: 'Force release', cancel: 'Cancel job' }

/** Blocker reports: open ones first (oldest first, as the host lists them), then resolved ones. */
export class BlockersState {
  all = $state<Blocker[]>([])
  error = $state<string | null>(null)
  loaded = $state(false)
  /** Blocker id → the action being sent. */
  pending = $state<Record<string, BlockerAction>>({})
  /** Blocker id → why an answer failed. */
  failures = $state<Record<string, string>>({})
  /**
   * Job id → the type of an open blocker's waiting job (what was trying to write), read once: a
   * job's type never changes. null for a job the host no longer has (purged), not asked again.
   */
  jobTypes = $state<Record<string, string | null>>({})

  readonly open = $derived(this.all.filter((b) => b.state === 'OPEN'))
  readonly resolved = $derived(this.all.filter((b) => b.state !== 'OPEN'))

  constructor(private readonly api: ApiClient) {}

  async refresh(): Promise<void> {
    try {
      this.all = (await this.api.listBlockers()).blockers
      this.error = null
    } catch (error) {
      this.error = describeError(error)
    } finally {
      this.loaded = true
    }
    await this.readJobTypes()
  }

  /** Reads the types of the open blockers' waiting jobs not known yet (a few: each is a halted job). */
  private async readJobTypes(): Promise<void> {
    const unknown = new Set(this.open.map((b) => b.requester.job_id).filter((id): id is string => id !== null && !(id in this.jobTypes)))
    await Promise.all(
      [...unknown].map(async (jobId) => {
        try {
          this.jobTypes[jobId] = (await this.api.getJob(jobId)).job.job_type
        } catch (error) {
          // A job the host does not have is not asked again; one it did not answer for is, at the next read.
          if (error instanceof ApiError && error.status === 404) this.jobTypes[jobId] = null
        }
      }),
    )
  }

  async resolve(blockerId: string, action: BlockerAction, note: string): Promise<boolean> {
    this.pending[blockerId] = action
    try {
      const { blocker } = await this.api.resolveBlocker(blockerId, action, note.trim() || null)
      this.all = this.all.map((b) => (b.blocker_id === blocker.blocker_id ? blocker : b))
      delete this.failures[blockerId]
      return true
    } catch (error) {
      this.failures[blockerId] = describeError(error)
      if (overtaken(error)) await this.readAgain(blockerId)
      return false
    } finally {
      delete this.pending[blockerId]
    }
  }

  /**
   * Reads a blocker an answer found resolved already (from the command line, another page) before
   * its event came: its card shows that answer rather than its buttons, and the refusal says who
   * gave it when the host knows.
   */
  private async readAgain(blockerId: string): Promise<void> {
    try {
      const { blocker } = await this.api.getBlocker(blockerId)
      this.all = this.all.map((b) => (b.blocker_id === blocker.blocker_id ? blocker : b))
      if (blocker.resolved_by !== null && this.failures[blockerId] !== undefined) this.failures[blockerId] += ` by ${blocker.resolved_by}`
    } catch {
      // The refusal stays as the host said it; the blocker's event, or the next read, brings its answer.
    }
  }

  /** Whether this event calls for a fresh read. */
  static moves(event: LogEvent): boolean {
    return eventMoves(event.type, 'blockers')
  }
}

