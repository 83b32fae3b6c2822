import { z } from 'zod'
import { BULK_ACTIONS, BULK_STATES, type BulkAction, type BulkPlan, type Engine, type QueuePause, type QueueSummary } from '../engine'
import { iso } from '../engine/rules/clock'
import { PartlyMadeError } from '../error-answer'
import { JOB_STATES } from '../engine/rules/states'
import { type Api, NOT_FOUND, type Route, route } from './route'
import { GivenTime, IsoTime, pathParams, QueueName, RequestedBy } from './schemas'
import { canonicalStates, JobAnswer, queueJob } from './views/queue'

/**
 * An operator's routes over every API's jobs (docs/operations.md): run a delayed job now,
 * retry a finished one, pause and resume queues, and bulk retry, cancel or purge by filter.
 * Jobs are shown as the queue API shows them.
 */


/** The body of an operator's one-job or one-queue action (run now, retry, pause, resume); it may be empty. */
export const OperatorRequest = z.strictObject({ requested_by: RequestedBy })
export type OperatorRequest = z.infer<typeof OperatorRequest>

export const BulkRequest = z.strictObject({
  states: z.array(z.enum(JOB_STATES)).max(JOB_STATES.length).optional().describe('Only jobs in these states (each must be one the action applies to)'),
  queue: z.string().min(1).max(200).optional(),
  job_type: z.string().min(1).max(200).optional(),
  addon_id: z.string().min(1).max(200).optional(),
  dead_letter: z
    .boolean()
    .optional()
    .describe('`true`: only the jobs that ran out of attempts (FAILED or TIMEOUT with `dead_letter`): retry them all, or purge them; `false`: only the others'),
  all: z.boolean().optional().describe('An empty filter: every job the action applies to (refused without it)'),
  dry_run: z.boolean().optional().describe('Count the matching jobs, change nothing'),
  finished_by: GivenTime.optional().describe('Retry and purge: only jobs that finished at or before this time'),
  counted_through: z
    .number()
    .int()
    .min(0)
    .optional()
    .describe("Retry and purge: only jobs with no event after this one of the log (unchanged since). Give a dry run's counted_through to act on exactly the jobs it counted"),
  requested_by: RequestedBy,
})
export type BulkRequest = z.infer<typeof BulkRequest>

// Answers. The routes answer through `reply`, so a body that drifts from its schema does not compile.

const QueuePauseFields = {
  queue: z.string(),
  paused: z.boolean(),
  paused_at: IsoTime.nullable(),
  paused_by: z.string().nullable(),
}

export const QueuePauseView = z.object(QueuePauseFields).meta({ id: 'QueuePause' })
export const QueueAnswer = z.object({ queue: QueuePauseView })
export type QueueAnswer = z.infer<typeof QueueAnswer>

export const QueueSummaryView = z
  .object({
    ...QueuePauseFields,
    counts: z.partialRecord(z.enum(JOB_STATES), z.number().int()).describe('Jobs by state (LEASED for a job under an ACTIVE lease); DONE jobs are not counted'),
  })
  .meta({ id: 'QueueSummary' })
export const QueueList = z.object({ queues: z.array(QueueSummaryView) })
export type QueueList = z.infer<typeof QueueList>

/** The most over-cost job ids a bulk retry's answer lists: enough to act on, and a bounded answer however many match. */
export const OVER_CAPACITY_LISTED = 100

export const BulkAnswer = z
  .object({
    action: z.enum(BULK_ACTIONS),
    matched: z.number().int().describe('Jobs the filter selected among those the action applies to'),
    changed: z.number().int().describe('Jobs it changed (0 on a dry run)'),
    dry_run: z.boolean(),
    over_capacity: z
      .array(z.string())
      .max(OVER_CAPACITY_LISTED)
      .describe(`A retry's: the jobs it refused (on a dry run, would refuse) because each costs more than the total capacity (matched, not changed), the first ${OVER_CAPACITY_LISTED} in the order walked; else empty`),
    over_capacity_count: z.number().int().describe('How many jobs a retry refused (on a dry run, would refuse) for their cost, all of them (over_capacity lists the first); else 0'),
    counted_at: IsoTime.nullable().describe('A dry run of retry or purge: the time it counted up to; else null'),
    counted_through: z
      .number()
      .int()
      .nullable()
      .describe('A dry run of retry or purge: the newest event of the log when it counted (give it as counted_through to act on exactly the jobs counted); else null'),
  })
  .meta({ id: 'BulkAnswer' })
export type BulkAnswer = z.infer<typeof BulkAnswer>

const queuePauseView = (q: QueuePause) => ({ queue: q.queue, paused: q.paused, paused_at: iso(q.paused_at), paused_by: q.paused_by })
const queueView = (q: QueueSummary) => ({ ...queuePauseView(q), counts: q.counts })

/** What each bulk action did to a job it changed, as its answer says it. */
const CHANGED: Record<BulkAction, string> = { retry: 'retried', cancel: 'canceled', purge: 'purged' }

/**
 * Runs a bulk call step by step, each step its own short transaction, letting other requests in
 * between (a step holds the write lock for at most a few hundred jobs). A step that fails (a
 * full disk) ends the call; the steps before it stay committed, and the failure's answer says
 * how many jobs they changed.
 */
async function runBulk(engine: Engine, plan: BulkPlan): Promise<{ matched: number; changed: number; over_capacity: string[]; over_capacity_count: number }> {
  let matched = 0
  let changed = 0
  const overCapacity: string[] = []
  let overCapacityCount = 0
  for (let cursor = plan.first; cursor; ) {
    let step: ReturnType<Engine['bulkStep']>
    try {
      step = engine.bulkStep(plan, cursor)
    } catch (error) {
      if (changed === 0) throw error // nothing was made: the failure's own answer is the truth
      throw new PartlyMadeError(
        error,
        `The bulk ${plan.action} stopped part way: ${changed} job(s) were ${CHANGED[plan.action]} by the steps before (each its own transaction), and stay so; the rest were not.`,
      )
    }
    matched += step.matched
    changed += step.changed
    overCapacityCount += step.overCapacity.length
    overCapacity.push(...step.overCapacity.slice(0, OVER_CAPACITY_LISTED - overCapacity.length))
    cursor = step.next
    if (cursor) await new Promise((resolve) => setImmediate(resolve))
  }
  return { matched, changed, over_capacity: overCapacity, over_capacity_count: overCapacityCount }
}

const JobParams = pathParams('job_id')
const QueueParams = z.object({ queue: QueueName })

/** One job's action, in the commit group. */
const jobAction = (verb: 'run-now' | 'retry', change: 'runNow' | 'retry', id: string, summary: string, errors: Route['errors']) =>
  route({
    method: 'POST',
    path: `/jobs/:job_id/${verb}`,
    id,
    summary,
    params: JobParams,
    body: OperatorRequest,
    answer: JobAnswer,
    errors,
    grouped: true,
    run: ({ body, params }, { engine }) => ({ job: queueJob(engine[change](params.job_id, body.requested_by ?? null)) }),
  })

/** One queue's pause or resume, in the commit group. */
const queueAction = (verb: 'pause' | 'resume', change: 'pauseQueue' | 'resumeQueue', summary: string) =>
  route({
    method: 'POST',
    path: `/queues/:queue/${verb}`,
    id: change,
    summary,
    params: QueueParams,
    body: OperatorRequest,
    answer: QueueAnswer,
    grouped: true,
    run: ({ body, params }, { engine }) => ({ queue: queuePauseView(engine[change](params.queue, body.requested_by ?? null)) }),
  })

export const operationsApi: Api = {
  tag: 'operations',
  description: "The operator's actions: run a delayed job now, retry a finished one, pause queues, bulk retry/cancel/purge",
  prefix: '/api',
  routes: [
    jobAction('run-now', 'runNow', 'runJobNow', 'Run a delayed job now', { 404: NOT_FOUND.job, 409: 'not_scheduled: the job does not wait for its run_at' }),
    // Before /jobs/:job_id/retry, which would take "bulk" for a job id. Each runs step by step,
    // each step its own short transaction (runBulk), not in one commit group.
    ...BULK_ACTIONS.map((action) =>
      route({
        method: 'POST',
        path: `/jobs/bulk/${action}`,
        id: `bulk${action[0]!.toUpperCase()}${action.slice(1)}`,
        summary: `Bulk ${action} of the jobs a filter selects, in steps (dry_run counts only)`,
        body: BulkRequest,
        answer: BulkAnswer,
        grouped: false,
        run: async ({ body }, { engine }) => {
          const { states, queue, job_type, addon_id, dead_letter, all, dry_run, requested_by, finished_by, counted_through } = body
          // Jobs show as the queue API shows them: a cancel of RUNNING ones takes the LEASED (not yet started) too.
          const shown = states !== undefined && BULK_STATES[action].includes('LEASED') ? canonicalStates(states) : states
          const filter = { states: shown, queue, job_type, addon_id, dead_letter }
          const plan = engine.planBulk(action as BulkAction, { filter, all, dry_run, requested_by, finished_by: finished_by === undefined ? undefined : Date.parse(finished_by), counted_through })
          const { matched, changed, over_capacity, over_capacity_count } = await runBulk(engine, plan)
          // A dry run of retry or purge says what it counted up to (the plan of a cancel holds neither).
          const counted = plan.dryRun ? { counted_at: iso(plan.finishedBy), counted_through: plan.countedThrough } : { counted_at: null, counted_through: null }
          return { action, matched, changed, dry_run: plan.dryRun, over_capacity, over_capacity_count, ...counted }
        },
      }),
    ),
    jobAction('retry', 'retry', 'retryJob', 'Retry a FAILED, TIMEOUT or CANCELED job: a new run with a fresh attempt budget', {
      400: 'cost_exceeds_capacity',
      404: NOT_FOUND.job,
      409: 'illegal_transition: the job has not finished, or is DONE',
    }),
    route({
      method: 'GET',
      path: '/queues',
      id: 'listQueues',
      summary: 'Queues with jobs other than DONE ones, or paused: counts by state, paused or not',
      answer: QueueList,
      grouped: false,
      run: (_, { engine }) => ({ queues: engine.listQueues().map(queueView) }),
    }),
    queueAction('pause', 'pauseQueue', 'Pause a queue: nothing is claimed or leased from it'),
    queueAction('resume', 'resumeQueue', 'Resume a paused queue'),
  ],
}
