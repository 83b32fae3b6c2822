import { eventMoves } from '../../src-shared/event-types'
import { describeError, type ApiClient, type Blocker, type BlockerAction, type LogEvent } from './api'

/** Blocker reports: open ones first (oldest first, as the host lists them), then resolved ones. */
export class BlockersState {
  all = $state<Blocker[]>([])
  error = $state<string | null>(null)
  loaded = $state(false)
  /** Blocker id → the action being sent. */
  pending = $state<Record<string, BlockerAction>>({})
  /** Blocker id → why an answer failed. */
  failures = $state<Record<string, string>>({})

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
      return false
    } finally {
      delete this.pending[blockerId]
    }
  }

  /** Whether this event calls for a fresh read. */
  static moves(event: LogEvent): boolean {
    return eventMoves(event.type, 'blockers')
  }
}

