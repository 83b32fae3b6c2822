import { findHost } from './host-target'
import { DEAD_LETTER_STATES, type JobState, SHOWN_STATES } from '../../src-shared/job-states'
import { checkActorName, ConfigError, parseCommandLine, CLIENT_TARGET_HELP, stopIfOutputFailed, WAIT_TIMED_OUT_EXIT, wholeNumber } from '../../src-shared/command-line'
import { bulkAnswerTimeoutMs, type ClientTarget } from '../../src-shared/client-target'
import { answered, HostError, hostApi, mayHaveArrived } from './http-client'
import { NoAnswerError } from '../../src-shared/http-json'
import { shellWord } from '../../src-shared/others-may-write'
import { printable } from '../../src-shared/printable'
import { table } from './text-table'
import { idEnd, idsEndingWith, SHORT_ID_END } from '../../src-shared/short-id'
import { counted } from '../../src-shared/plural'
import { describeError, errorLine, type JobAnswer } from './job-end'
import type { components } from '../../src-shared/api-types'

/**
 * The states `--state` can find. The queue API shows a LEASED job as RUNNING and filters it
 * that way too, so `--state LEASED` would always answer "no LEASED jobs" while jobs run: it is
 * refused, naming RUNNING.
 */
const LISTED_STATES: readonly JobState[] = SHOWN_STATES

export const JOBS_HELP = `Usage: leasehold jobs [list] [flags]
       leasehold jobs show|cancel|retry|run-now JOB [flags]
       leasehold jobs retry --dead-letter [--type T] [--state S] [--dry-run] [flags]

Lists jobs, newest first: id, type, state, priority, units, attempts, when each was created, and
why a waiting job is not running yet (its waiting_reason), with UNTIL, the time that wait ends
by itself when it does (a retry's backoff, a scheduled run, a refused file's one retry). Times
are ISO-8601 UTC. States show as the queue API shows them: a LEASED job is RUNNING. A job that
ran out of attempts (dead-lettered) reads FAILED (dead letter) or TIMEOUT (dead letter).

Commands (docs/operations.md; bulk actions by other filters are over HTTP and in the dashboard):
  list                 the jobs (the default)
  show JOB             one job whole: its state (and why it waits, while it does), queue,
                       priority, units, times, payload, its result or its error, and each
                       attempt with its worker, outcome and error (a payload or result longer
                       than a line is cut: --json has all, and the errors' stacks)
  cancel JOB           cancel a job: at once if it waits, or ask a running one to stop
                       (--reason, --by)
  retry JOB            a FAILED, TIMEOUT or CANCELED job back to QUEUED, as a new run with a
                       fresh attempt budget (--by)
  retry --dead-letter  every dead-lettered job back to QUEUED, each as retry JOB does it; with
                       --type or --state only those; --dry-run counts them and changes nothing;
                       exits 1 naming the jobs it refused as costing more than the total capacity
                       (--dry-run names them too, and exits 0). Waits 10 minutes for the host's
                       answer (LEASEHOLD_TIMEOUT_S, when set); the host carries the retry on to
                       its end without it, so an answer that does not come in time (exit 124) or
                       a connection cut (exit 1) is said as a retry that may have been made, in
                       whole or in part: --dry-run then counts the jobs not retried yet
  run-now JOB          run a delayed job now instead of at its run_at (--by)
JOB is a job's whole id, or its end as the tables print it (…3f9a0c12, 8 characters or more),
when that ends one job's id only. --dry-run, --state and --type go with retry --dead-letter, not
with retry JOB; a flag given to a command that does not take it is named with the one it belongs to.

Flags:
  --state S            only jobs in this state: ${LISTED_STATES.join(', ')}
                       (not LEASED: such a job is listed as RUNNING)
  --dead-letter        only the dead-lettered jobs: FAILED or TIMEOUT because they ran out of
                       attempts, the ones to bring back with retry (with --state, FAILED or TIMEOUT)
  --type T             only jobs of this type (the whole type)
  --dry-run            retry --dead-letter: count the jobs it would retry, and name those it would
                       refuse for their cost; change nothing
  --limit N            at most N jobs, 1 to 500 [50]
  --cursor C           the page after the one that printed C (its next_cursor, or the line
                       that ends the table when there are more jobs than shown)
  --json               print {jobs, next_cursor} as the host answers it, each job with its
                       payload, which the table does not ask for (show: {job, result,
                       attempts}; cancel, retry, run-now: the job as the host answers it)
  --reason TEXT        why (cancel): in its event, and the note of a job canceled at once
  --by NAME            who asks, recorded in the job's event [operator]
${CLIENT_TARGET_HELP}
  -h, --help`

interface JobsFlags {
  url?: string
  token?: string
  'data-dir'?: string
  state?: string
  'dead-letter'?: boolean
  type?: string
  'dry-run'?: boolean
  limit?: string
  cursor?: string
  json?: boolean
  reason?: string
  by?: string
}

/**
 * Where each flag of `jobs` belongs: one given to a subcommand that does not take it is refused
 * as belonging there (`jobs list --by x`), rather than as unknown when `jobs --help` lists it.
 */
const FLAG_HOMES: Readonly<Record<string, string>> = {
  state: 'jobs list and jobs retry --dead-letter',
  'dead-letter': 'jobs list and jobs retry',
  type: 'jobs list and jobs retry --dead-letter',
  limit: 'jobs list',
  cursor: 'jobs list',
  'dry-run': 'jobs retry --dead-letter',
  reason: 'jobs cancel',
  by: 'jobs cancel, retry and run-now',
}

const ACTIONS = ['cancel', 'retry', 'run-now'] as const
/** The flags that make `jobs retry` the retry of every dead-lettered job rather than of one. */
const BULK_RETRY_FLAGS = ['--dead-letter', '--state', '--type', '--dry-run']
type Action = (typeof ACTIONS)[number]

/** `leasehold jobs [list]`: GET /api/scheduler/jobs as a table or as JSON; `jobs show JOB`: one job whole; `jobs cancel|retry|run-now JOB`: that action on one job. */
export async function jobsCommand(argv: string[], env: NodeJS.ProcessEnv): Promise<number> {
  const sub = argv[0] === undefined || argv[0].startsWith('-') ? 'list' : argv[0]
  if (sub !== 'list' && sub !== 'show' && !ACTIONS.includes(sub as Action)) throw new ConfigError(`jobs needs list, show, ${ACTIONS.join(', ')} (got "${sub}"); see leasehold jobs --help`)
  const rest = sub === argv[0] ? argv.slice(1) : argv
  if (sub === 'show') return showJob(rest, env)
  if (sub === 'retry' && (rest.length === 0 || rest.some((arg) => BULK_RETRY_FLAGS.includes(arg.split('=')[0]!)))) return retryDeadLetters(rest, env)
  if (sub !== 'list') return jobAction(sub as Action, rest, env)
  const flags = parseCommandLine<JobsFlags>(rest, ['state', 'type', 'limit', 'cursor'], ['json', 'dead-letter'], false, FLAG_HOMES).values
  const { state, deadLetter, jobType } = selection(flags)
  const limit = wholeNumber('limit', flags.limit, 1, 500)
  if (flags.cursor !== undefined && flags.cursor.trim() === '') throw new ConfigError('--cursor needs the next_cursor of a page')
  const target = await findHost(flags, env)
  // The table shows no payload, so it asks for none (a payload may be megabytes); --json prints the page whole, as the host answers it.
  const payload = flags.json ? undefined : ('false' as const)
  const query = { state, dead_letter: deadLetter ? ('true' as const) : undefined, job_type: jobType, payload, limit, cursor: flags.cursor }
  const page = await answered(target, hostApi(target).GET('/api/scheduler/jobs', { params: { query } }))
  if (flags.json) {
    console.log(JSON.stringify(page, null, 2))
    return 0
  }
  if (page.jobs.length === 0) {
    const which = [deadLetter ? 'dead-lettered' : '', state ?? ''].filter(Boolean).join(' ')
    console.log(`no ${which ? `${which} ` : ''}jobs${flags.cursor ? ' after that page' : ''}`)
    return 0
  }
  const rows = page.jobs.map((job) => [
    job.job_id,
    job.job_type,
    job.dead_letter ? `${job.state} (dead letter)` : job.state,
    job.priority,
    String(job.cost_units),
    `${job.attempts}/${job.max_attempts}`,
    job.created_at,
    job.waiting_until ?? '-',
    job.waiting_reason ?? '-',
  ])
  console.log(table(['ID', 'TYPE', 'STATE', 'PRIORITY', 'UNITS', 'ATTEMPTS', 'CREATED', 'UNTIL', 'WAITING'], rows))
  if (page.next_cursor) {
    // Said after the table it ends: a table that could not be written (a full disk) is said instead.
    stopIfOutputFailed()
    const more = limit === 500 ? '' : 'raise --limit (up to 500), or '
    console.error(`(more jobs than shown; ${more}see the next page with --cursor ${printable(page.next_cursor)})`)
  }
  return 0
}

type Attempt = components['schemas']['QueueAttempt']

/** The JOB of a one-job command (`jobs show JOB`): exactly one, not empty, and not an end of an id too short to tell jobs apart. */
function oneJob(command: string, words: readonly string[]): string {
  if (words.length !== 1) throw new ConfigError(`jobs ${command} needs one job id (got ${words.length})`)
  const given = words[0]!.trim()
  if (given === '') throw new ConfigError(`jobs ${command} needs one job id (got an empty one)`)
  if (SHORT_ID_END.test(given)) throw new ConfigError(`"${given}" is too short to name a job: give its whole id, or its end with 8 characters or more (…3f9a0c12)`)
  return given
}

/**
 * The job a one-job command names: by its whole id, or by the end of it as `leasehold status`,
 * `blockers` and the waiting reasons print it (…0778931b, with or without the ellipsis), found
 * through the jobs search. An end that ends no job's id is the host's `job_not_found` (exit 1);
 * one that ends several is a usage error naming them (exit 2). Anything else goes to the host as
 * given, which answers for it. The search reads the whole jobs table, as the dashboard's search
 * box does: ~150 ms of the host's main thread for 300,000 jobs here.
 */
async function wholeJobId(target: ClientTarget, given: string): Promise<string> {
  const end = idEnd(given)
  if (end === undefined) return given
  const page = await answered(target, hostApi(target).GET('/api/scheduler/jobs', { params: { query: { search: end, payload: 'false', limit: 500 } } }))
  const ids = idsEndingWith(page.jobs.map((job) => job.job_id), end)
  if (ids.length === 1) return ids[0]!
  if (ids.length === 0) throw new HostError(404, 'job_not_found', `No job's id ends with ${end}`, {})
  throw new ConfigError(`${end} ends the ids of ${ids.length} jobs (${printable(ids.join(', '))}): give more of the id`)
}

/** `jobs show JOB`: the job, its result and its attempts, read from the host (GET /api/scheduler/jobs/{id} and its /attempts). */
async function showJob(argv: string[], env: NodeJS.ProcessEnv): Promise<number> {
  const { values: flags, positionals } = parseCommandLine<JobsFlags>(argv, [], ['json'], true, FLAG_HOMES)
  const given = oneJob('show', positionals)
  const target = await findHost(flags, env)
  const api = hostApi(target)
  const path = { params: { path: { job_id: await wholeJobId(target, given) } } }
  const answer = await answered(target, api.GET('/api/scheduler/jobs/{job_id}', path))
  const { attempts } = await answered(target, api.GET('/api/scheduler/jobs/{job_id}/attempts', path))
  if (flags.json) console.log(JSON.stringify({ ...answer, attempts }, null, 2))
  else console.log(jobDetails(answer, attempts).join('\n'))
  return 0
}

/** How much of a payload or a result `jobs show` prints on its line. */
const SHOWN_JSON_CHARS = 200

/** A JSON value on one line, cut after {@link SHOWN_JSON_CHARS} characters (never inside a character) with how long it is. */
function jsonLine(value: unknown): string {
  const text = JSON.stringify(value)
  if (text.length <= SHOWN_JSON_CHARS) return text
  const cut = /[\ud800-\udbff]/.test(text[SHOWN_JSON_CHARS - 1]!) ? SHOWN_JSON_CHARS - 1 : SHOWN_JSON_CHARS
  return `${text.slice(0, cut)}… (${text.length.toLocaleString('en-US')} characters; --json has all)`
}

/** `jobs show`'s lines: the job's fields, then its attempts as a table. Free text is made printable (a job's note or error comes from its handler). */
function jobDetails({ job, result }: JobAnswer, attempts: readonly Attempt[]): string[] {
  const state = [job.dead_letter ? `${job.state} (dead letter)` : job.state]
  if (job.progress != null && !result) state.push(`${Math.round(job.progress * 100)}%`)
  state.push(`${job.attempts} of ${job.max_attempts} attempts`)
  const lines = [`job       ${job.job_id}`, `type      ${printable(job.job_type)}`, `state     ${state.join(', ')}`]
  // A finished job's progress and note are those of its last heartbeat: not worth repeating.
  if (job.note && !result) lines.push(`note      ${printable(job.note.replace(/\s+/g, ' ').trim())}`)
  if (job.waiting_reason) lines.push(`waiting   ${printable(job.waiting_reason)}${job.waiting_until ? ` (until ${job.waiting_until})` : ''}`)
  if (job.cancel_requested && !result) lines.push('canceling asked to stop; it ends CANCELED once its worker stops it (DONE if it finishes first)')
  lines.push(`queue     ${printable(job.queue)}, priority ${job.priority}, ${counted(job.cost_units, 'unit')}`)
  if (job.addon_id) lines.push(`add-on    ${printable(job.addon_id)}`)
  lines.push(`created   ${job.created_at}`)
  if (job.run_at) lines.push(`run at    ${job.run_at}`)
  if (result?.started_at) lines.push(`started   ${result.started_at}`)
  if (result?.finished_at) lines.push(`finished  ${result.finished_at}`)
  if (result && job.state !== 'DONE') lines.push(`error     ${printable(describeError({ job, result }))}`)
  if (result && job.state === 'DONE') lines.push(`result    ${printable(jsonLine(result.result_data))}`)
  lines.push(`payload   ${printable(jsonLine(job.payload))}`)
  // A job that ended before it ran (canceled as it waited) never will: no "yet".
  if (attempts.length === 0) lines.push(result ? 'attempts  none' : 'attempts  none yet')
  else {
    const rows = attempts.map((a) => [
      String(a.attempt),
      a.worker_id,
      a.started_at,
      a.finished_at ?? '-',
      a.outcome === null ? 'running' : a.disposition && a.disposition !== 'FINAL' && a.disposition !== a.outcome ? `${a.outcome}, ${a.disposition.toLowerCase().replace('_', '-')}` : a.outcome,
      a.error == null ? '-' : errorLine(a.error),
    ])
    lines.push('attempts', ...table(['#', 'WORKER', 'STARTED', 'FINISHED', 'OUTCOME', 'ERROR'], rows).split('\n').map((line) => `  ${line}`))
  }
  return lines
}

/** The jobs `--state`, `--dead-letter` and `--type` select, checked: a state no job is listed in, or no dead letter is in, is a usage error. */
function selection(flags: JobsFlags): { state: Exclude<JobState, 'LEASED'> | undefined; deadLetter: boolean; jobType: string | undefined } {
  const state = flags.state?.toUpperCase() as JobState | undefined
  if (state === 'LEASED') throw new ConfigError('--state LEASED finds nothing: a LEASED job is listed as RUNNING (use --state RUNNING)')
  if (state !== undefined && !LISTED_STATES.includes(state)) {
    throw new ConfigError(`--state must be one of ${LISTED_STATES.join(', ')} (got "${flags.state}")`)
  }
  const deadLetter = flags['dead-letter'] === true
  if (deadLetter && state !== undefined && !(DEAD_LETTER_STATES as readonly JobState[]).includes(state)) {
    throw new ConfigError(`--dead-letter with --state ${state} finds nothing: a dead-lettered job is ${DEAD_LETTER_STATES.join(' or ')}`)
  }
  if (flags.type !== undefined && flags.type.trim() === '') throw new ConfigError('--type needs a job type')
  return { state, deadLetter, jobType: flags.type?.trim() }
}

/**
 * `jobs retry --dead-letter`: every dead-lettered job (of `--type`, in `--state`) back to the
 * queue through the bulk retry route, as the dashboard's bulk retry of its Dead letters filter
 * does; prints how many it retried (or, with --dry-run, would retry).
 */
async function retryDeadLetters(argv: string[], env: NodeJS.ProcessEnv): Promise<number> {
  const { values: flags, positionals } = parseCommandLine<JobsFlags>(argv, ['state', 'type', 'by'], ['json', 'dead-letter', 'dry-run'], true, FLAG_HOMES)
  if (positionals.length > 0) {
    // `jobs retry JOB --dry-run`: the one job's retry takes none of the bulk retry's flags.
    if (flags['dead-letter']) throw new ConfigError(`jobs retry --dead-letter retries every dead-lettered job: it takes no job id (got "${positionals[0]}")`)
    const bulk = BULK_RETRY_FLAGS.find((flag) => argv.some((arg) => arg.split('=')[0] === flag))
    throw new ConfigError(`${bulk} goes with jobs retry --dead-letter only; jobs retry JOB retries one job, without it`)
  }
  const { state, deadLetter, jobType } = selection(flags)
  if (!deadLetter) throw new ConfigError('jobs retry needs a job id, or --dead-letter to retry every dead-lettered job')
  if (flags.by !== undefined) checkActorName('by', flags.by)
  const found = await findHost(flags, env)
  const target = { ...found, timeoutMs: bulkAnswerTimeoutMs(found) }
  const body = { dead_letter: true, states: state && [state], job_type: jobType, dry_run: flags['dry-run'] === true, requested_by: flags.by ?? 'operator' }
  let answer: components['schemas']['BulkAnswer']
  try {
    answer = await answered(target, hostApi(target).POST('/api/jobs/bulk/retry', { body }))
  } catch (error) {
    // A dry run changes nothing: a lost answer is only a failure.
    if (body.dry_run || !mayHaveArrived(error)) throw error
    console.error(`leasehold: ${unansweredBulkRetry(error as Error, state, jobType)}`)
    return (error as Error).cause instanceof NoAnswerError ? WAIT_TIMED_OUT_EXIT : 1
  }
  // A job refused for its cost stays dead-lettered until the total is raised: the retry did not
  // do all it was asked, so it fails (exit 1), naming those jobs. A dry run names them too, and
  // did what it was asked.
  const failed = answer.over_capacity_count > 0 && !answer.dry_run ? 1 : 0
  if (flags.json) {
    console.log(JSON.stringify(answer, null, 2))
    return failed
  }
  const which = `dead-lettered ${state ? `${state} ` : ''}job${answer.matched === 1 ? '' : 's'}${jobType ? ` of type ${jobType}` : ''}`
  if (answer.dry_run) {
    console.log(`${answer.matched} ${which} to retry (--dry-run: none retried)`)
    if (answer.over_capacity_count > 0) console.log(overCapacityLine(answer.over_capacity, answer.over_capacity_count, 'would not be retried'))
  }
  else if (answer.matched === 0) console.log(`no ${which} to retry`)
  else {
    const movedOn = answer.matched - answer.changed - answer.over_capacity_count
    const notRetried = [
      answer.over_capacity_count > 0 ? `${answer.over_capacity_count} refused for ${answer.over_capacity_count === 1 ? 'its' : 'their'} cost` : '',
      movedOn > 0 ? `${movedOn} moved on meanwhile` : '',
    ].filter(Boolean)
    console.log(`retried ${answer.changed} of ${answer.matched} ${which}${notRetried.length > 0 ? `; not retried: ${notRetried.join(', ')}` : ''}`)
  }
  if (failed) console.error(`leasehold: ${overCapacityLine(answer.over_capacity, answer.over_capacity_count, 'not retried')}`)
  return failed
}

/**
 * A bulk retry whose answer never came (none in time, or the connection cut after the request
 * went). The host carries a bulk action on to its end whether or not its client still waits, in
 * steps of 500 jobs, each its own transaction: the retry may be done, still under way, or (a host
 * that stopped) done in part, never "not done". The line says so and which commands show where it
 * stands; its exit is 124 when the wait ran out (as `submit --wait-timeout`'s: the work goes on).
 */
function unansweredBulkRetry(error: Error, state: JobState | undefined, jobType: string | undefined): string {
  const filter = `--dead-letter${jobType === undefined ? '' : ` --type ${shellWord(jobType)}`}${state === undefined ? '' : ` --state ${state}`}`
  return `${error.message}; the retry may have been made all the same, in whole or in part, or still be under way on the host (a bulk retry goes on to its end without waiting for its answer): leasehold jobs retry ${filter} --dry-run counts the dead-lettered jobs not retried yet, and leasehold jobs ${filter} lists them`
}

/** The jobs a bulk retry refused (or, counted, would refuse) for their cost, by id (the answer lists the first of them), and what would let them run. */
function overCapacityLine(listed: readonly string[], count: number, outcome: 'not retried' | 'would not be retried'): string {
  const more = count - listed.length
  const ids = `${listed.map(printable).join(', ')}${more > 0 ? ` and ${more} more` : ''}`
  return `${outcome}, as ${count === 1 ? 'its cost exceeds' : 'each costs more than'} the total capacity: ${ids} (raise total_units, then retry ${count === 1 ? 'it' : 'them'}; leasehold jobs show JOB gives a job's cost)`
}

/** One operator action on one job, as the dashboard's buttons do it; prints the job as it now is. */
async function jobAction(action: Action, argv: string[], env: NodeJS.ProcessEnv): Promise<number> {
  const { values: flags, positionals } = parseCommandLine<JobsFlags>(argv, action === 'cancel' ? ['reason', 'by'] : ['by'], ['json'], true, FLAG_HOMES)
  const given = oneJob(action, positionals)
  if (flags.by !== undefined) checkActorName('by', flags.by)
  const requested_by = flags.by ?? 'operator'
  const target = await findHost(flags, env)
  const jobId = await wholeJobId(target, given)
  const api = hostApi(target)
  const path = { params: { path: { job_id: jobId } } }
  const { job } =
    action === 'cancel'
      ? await answered(target, api.POST('/api/scheduler/jobs/{job_id}/cancel', { ...path, body: { reason: flags.reason ?? null, requested_by } }))
      : await answered(target, api.POST(action === 'retry' ? '/api/jobs/{job_id}/retry' : '/api/jobs/{job_id}/run-now', { ...path, body: { requested_by } }))
  if (flags.json) console.log(JSON.stringify({ job }, null, 2))
  else if (action === 'cancel' && job.state !== 'CANCELED') console.log(`job ${printable(job.job_id)} ${job.state}: asked to stop; it ends CANCELED once its worker stops it (DONE if it finishes first)`)
  else console.log(`job ${printable(job.job_id)} ${job.state}`)
  return 0
}
