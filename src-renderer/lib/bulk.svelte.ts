import { BULK_STATES, DEAD_LETTER_STATES, describeError, type ApiClient, type BulkAction, type BulkAnswer, type BulkRequest } from './api'
import type { JobFilter } from './jobs.svelte'
import { quotedName } from './names'
import { shortId } from '../../src-shared/short-id'

/** A bulk action counted and waiting for the operator's yes. */
export interface PendingBulk {
  action: BulkAction
  /** What the action will be asked: for retry and purge, only the jobs counted (`counted_through`: none changed since the count). */
  request: BulkRequest
  /** How many jobs it will touch, as the host counted them (a dry run). */
  matched: number
  /** A retry's: the jobs among them it will refuse for their cost, as the count named them (the first ids, and how many). */
  overCost?: OverCost
}

/** Jobs a retry refuses (or will refuse) because each costs more than the total capacity: the host lists the first. */
interface OverCost {
  ids: readonly string[]
  count: number
}

/**
 * Bulk retry and purge of the jobs the jobs view's filter selects. The host counts the jobs
 * first (a dry run), the operator confirms that number, then the host acts on the jobs it
 * counted (none that finished or changed after the count) and says how many it changed.
 */
export class BulkState {
  pending = $state<PendingBulk | null>(null)
  /** The action being counted or run. */
  busy = $state<BulkAction | null>(null)
  result = $state<BulkAnswer | null>(null)
  error = $state<string | null>(null)
  /** The action and the filter's request that the pending question, or the result shown, was counted for. */
  private countedFor: { action: BulkAction; request: BulkRequest } | null = null

  constructor(
    private readonly api: ApiClient,
    /** Called after an action changed jobs (the jobs table reads again). */
    private readonly changed: () => void = () => {},
  ) {}

  /**
   * The request for this filter, or null when the action cannot apply to it: to the state it
   * shows (a retry of RUNNING jobs), to dead letters (a cancel: they have finished), or to a
   * search (bulk actions select by whole values, a search by parts). An empty filter means
   * every job the action applies to: the count the operator confirms says how many.
   */
  static requestFor(action: BulkAction, filter: JobFilter): BulkRequest | null {
    if (filter.search !== '') return null
    if (filter.state !== '' && !BULK_STATES[action].includes(filter.state)) return null
    // Dead letters have finished: a retry or a purge takes them, and only in the states they are in.
    const states = filter.state !== '' ? [filter.state] : BULK_STATES[action]
    if (filter.dead_letter && !states.some(isDeadLetterState)) return null
    const request: BulkRequest = {}
    if (filter.state !== '') request.states = [filter.state]
    if (filter.dead_letter) request.dead_letter = true
    // Whole values as the filter holds them: the host tells " padded " from "padded".
    if (filter.job_type !== '') request.job_type = filter.job_type
    if (filter.addon_id !== '') request.addon_id = filter.addon_id
    if (Object.keys(request).length === 0) request.all = true
    return request
  }

  /**
   * Drops the question, or the result shown, once the filter is no longer the one it was counted
   * for (the operator picked another state, or typed a type): a yes is for the jobs the table
   * shows, never for those of a filter left behind. The jobs view calls it as its filter changes.
   */
  keepFor(filter: JobFilter): void {
    const counted = this.countedFor
    if (counted && !sameSelection(BulkState.requestFor(counted.action, filter), counted.request)) this.dismiss()
  }

  /** Counts the jobs the action would touch and asks for confirmation. */
  async prepare(action: BulkAction, filter: JobFilter): Promise<void> {
    const request = BulkState.requestFor(action, filter)
    if (!request) return
    this.busy = action
    this.pending = null
    this.result = null
    this.error = null
    const counting = (this.countedFor = { action, request })
    try {
      const { matched, counted_through, over_capacity, over_capacity_count } = await this.api.bulk(action, { ...request, dry_run: true })
      // The filter changed while the host counted: the count is of jobs no longer shown.
      if (this.countedFor !== counting) return
      // Jobs that finish between the count and the yes are not swept up: the yes is for the number counted.
      const overCost = over_capacity_count > 0 ? { ids: over_capacity, count: over_capacity_count } : undefined
      this.pending = { action, request: counted_through === null ? request : { ...request, counted_through }, matched, overCost }
    } catch (error) {
      this.error = describeError(error)
    } finally {
      this.busy = null
    }
  }

  async confirm(): Promise<void> {
    const pending = this.pending
    if (!pending) return
    this.busy = pending.action
    try {
      this.result = await this.api.bulk(pending.action, pending.request)
      this.pending = null
      this.error = null
      if (this.result.changed > 0) this.changed()
    } catch (error) {
      this.error = describeError(error)
      // A call cut short (a full disk) may have changed jobs in its steps before: its detail says how many, and the list shows them.
      this.changed()
    } finally {
      this.busy = null
    }
  }

  dismiss(): void {
    this.pending = null
    this.result = null
    this.error = null
    this.countedFor = null
  }
}

/** Whether two requests select the same jobs (what a yes was counted for aside). */
function sameSelection(a: BulkRequest | null, b: BulkRequest): boolean {
  if (a === null) return false
  const { counted_through: _a, ...left } = a
  const { counted_through: _b, ...right } = b
  return JSON.stringify(left, Object.keys(left).sort()) === JSON.stringify(right, Object.keys(right).sort())
}

const VERBS: Record<BulkAction, { verb: string; done: string }> = {
  retry: { verb: 'Retry', done: 'Retried' },
  cancel: { verb: 'Cancel', done: 'Canceled' },
  purge: { verb: 'Purge', done: 'Purged' },
}

const isDeadLetterState = (state: string) => (DEAD_LETTER_STATES as readonly string[]).includes(state)

const jobs = (n: number) => `${n} job${n === 1 ? '' : 's'}`

/** The jobs a request selects, in words: "FAILED jobs of type render", "every finished job". */
export function describeSelection(action: BulkAction, request: BulkRequest): string {
  const states = request.states ?? BULK_STATES[action]
  const what = request.dead_letter
    ? `dead-lettered ${request.states ? `${request.states.join(', ')} ` : ''}jobs`
    : !request.states && action === 'purge'
      ? 'finished jobs'
      : `${states.join(', ')} jobs`
  const of = [request.job_type && `of type ${quotedName(request.job_type)}`, request.addon_id && `of add-on ${quotedName(request.addon_id)}`, request.queue && `in queue ${quotedName(request.queue)}`]
  const which = of.filter(Boolean).join(' ')
  return request.all ? `every one of the ${what}` : `the ${what}${which ? ` ${which}` : ''}`
}

/** The confirmation question: what will happen to how many jobs. */
export function bulkQuestion(pending: PendingBulk): string {
  const { action, request, matched } = pending
  if (matched === 0) return `No job matches: nothing to ${action} (${describeSelection(action, request)}).`
  const selection = describeSelection(action, request)
  if (action === 'purge') return `Purge ${jobs(matched)}? ${capitalize(selection)} will be deleted with their attempts and events. This cannot be undone.`
  if (action === 'retry') {
    const question = `Retry ${jobs(matched)}? ${capitalize(selection)} will go back to the queue, each as a new run with a fresh attempt budget.`
    const overCost = pending.overCost
    if (!overCost) return question
    const them = overCost.count === matched ? (matched === 1 ? 'It costs' : 'Each costs') : `${overCost.count} of them (${overCostIds(overCost)}) ${overCost.count === 1 ? 'costs' : 'cost'}`
    return `${question} ${them} more than the total capacity, and will not be retried until it is raised.`
  }
  return `Cancel ${jobs(matched)}? ${capitalize(selection)} will be canceled (running ones are asked to stop).`
}

/**
 * What an action did: "Retried 3 of 3 jobs.", "Retried 2 of 3 jobs; 1 was not (moved on
 * meanwhile, or refused)." A retry names the jobs it refused for their cost, the one refusal the
 * operator can act on (raise the total capacity), by their short ids, as the host lists them.
 */
export function bulkOutcome(answer: BulkAnswer): string {
  const skipped = answer.matched - answer.changed
  const overCost = answer.over_capacity_count
  const others = skipped - overCost
  const rest = [
    overCost > 0 && `${overCost} ${overCost === 1 ? 'costs' : 'cost'} more than the total capacity (${overCostIds({ ids: answer.over_capacity, count: overCost })})`,
    others > 0 && `${others} ${others === 1 ? 'was' : 'were'} not (moved on meanwhile, or refused)`,
  ].filter(Boolean)
  return `${VERBS[answer.action].done} ${answer.changed} of ${jobs(answer.matched)}${rest.length > 0 ? `; ${rest.join('; ')}` : ''}.`
}

/** The first few jobs a retry refuses for their cost, by their short ids; "…" when there are more. */
function overCostIds({ ids, count }: OverCost): string {
  const shown = ids.slice(0, OVER_COST_SHOWN).map(shortId)
  return count > shown.length ? `${shown.join(', ')}, …` : shown.join(', ')
}

/** How many over-cost jobs the outcome line names. */
const OVER_COST_SHOWN = 3

export const bulkVerb = (action: BulkAction): string => VERBS[action].verb

const capitalize = (text: string) => text.charAt(0).toUpperCase() + text.slice(1)
