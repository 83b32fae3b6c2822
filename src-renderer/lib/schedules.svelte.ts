import { eventMoves } from '../../src-shared/event-types'
import { ApiError, describeError, type ApiClient, type LogEvent, type Schedule } from './api'
import { changeInput, createInput, hostProblem, type DraftResult, type FormProblem, type ScheduleDraft } from './schedule-form'

/** Recurring schedules (docs/schedules.md), by name, with the operator's changes to them. */
export class SchedulesState {
  all = $state<Schedule[]>([])
  error = $state<string | null>(null)
  loaded = $state(false)
  saving = $state(false)
  /** Why the last create or edit was refused (the host's reason, or each the form found), and the field each is about; empty when it was not. */
  formErrors = $state<FormProblem[]>([])
  /** Schedule name → the change being sent (enable, disable, delete). */
  pending = $state<Record<string, string>>({})
  /** Schedule name → why a change failed. */
  failures = $state<Record<string, string>>({})

  constructor(private readonly api: ApiClient) {}

  async refresh(): Promise<void> {
    try {
      this.all = (await this.api.listSchedules()).schedules
      this.error = null
    } catch (error) {
      this.error = describeError(error)
    } finally {
      this.loaded = true
    }
  }

  /** Creates a schedule from a draft; true once the host took it. */
  create(draft: ScheduleDraft): Promise<boolean> {
    return this.send(createInput(draft), (input) => this.api.createSchedule(input))
  }

  /** Changes the schedule `name` (its timing, job and overlap) from a draft, if it is still at the revision the draft was made from; true once the host took it. */
  update(name: string, draft: ScheduleDraft): Promise<boolean> {
    return this.send(changeInput(draft), (change) => this.api.updateSchedule(name, change, draft.revision ?? undefined))
  }

  setEnabled(name: string, enabled: boolean): Promise<void> {
    return this.act(name, enabled ? 'enable' : 'disable', async () => this.put((await this.api.updateSchedule(name, { enabled })).schedule))
  }

  remove(name: string): Promise<void> {
    return this.act(name, 'delete', async () => {
      await this.api.deleteSchedule(name)
      this.all = this.all.filter((s) => s.name !== name)
    })
  }

  /** Whether this event calls for a fresh read: a schedule changed or fired, or the job of a last run moved. */
  apply(event: LogEvent): boolean {
    if (eventMoves(event.type, 'schedules')) return true
    return eventMoves(event.type, 'job-state') && event.job_id != null && this.all.some((s) => s.last_run?.job_id === event.job_id)
  }

  private async send<T>(body: DraftResult<T>, call: (value: T) => Promise<{ schedule: Schedule }>): Promise<boolean> {
    if (!body.ok) {
      this.formErrors = body.problems
      return false
    }
    this.saving = true
    try {
      this.put((await call(body.value)).schedule)
      this.formErrors = []
      return true
    } catch (error) {
      this.formErrors = [hostProblem(describeError(error), error instanceof ApiError ? error.code : undefined)]
      return false
    } finally {
      this.saving = false
    }
  }

  private async act(name: string, what: string, change: () => Promise<void>): Promise<void> {
    this.pending[name] = what
    try {
      await change()
      delete this.failures[name]
    } catch (error) {
      this.failures[name] = describeError(error)
    } finally {
      delete this.pending[name]
    }
  }

  private put(schedule: Schedule): void {
    const others = this.all.filter((s) => s.name !== schedule.name)
    this.all = [...others, schedule].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
  }
}
