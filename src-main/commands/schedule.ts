import type { ClientTarget } from '../../src-shared/client-target'
import { printable } from '../../src-shared/printable'
import { findHost } from './host-target'
import type { components, paths } from '../../src-shared/api-types'
import { shortId } from '../../src-shared/short-id'
import { entityTag } from '../../src-shared/entity-tag'
import { checkPathSegment, ConfigError, parseCommandLine, CLIENT_TARGET_HELP } from '../../src-shared/command-line'
import { answered, HostError, hostApi } from './http-client'
import { table } from './text-table'
import { buildSubmit, type SubmitFlags } from './submit'

/** How many times `edit` makes its change over a fresh read when the schedule changed under it. */
const EDIT_ATTEMPTS = 3

export const SCHEDULE_HELP = `Usage: leasehold schedule <add|edit|list|pause|resume|rm> [NAME] [flags]

Recurring schedules: a cron expression in a time zone, and the job each firing submits
(/api/schedules; the rules are in docs/schedules.md). A firing makes one job, once; firings
missed while the host was down are caught up with one run, the latest.

  add NAME --cron EXPR --type TYPE [flags]   create a schedule
  edit NAME [flags of add]                   change what the flags given say, keep the rest
                                             (the job's other fields too); a new --cron or
                                             --tz fires from its first firing after now; an
                                             edit by someone else meanwhile is kept, the
                                             change made over it (docs/schedules.md)
  list                                       every schedule: state (enabled, paused, finished:
                                             no firing left, or stopped: its cron can no longer
                                             be read here), overlap, next firing, last run
  pause NAME                                 stop it firing (enabled false)
  resume NAME                                fire again, from its first firing after now
  rm NAME                                    delete it (the jobs it made stay)

Flags of add (and of edit, but --paused: pause and resume switch a schedule):
  --cron EXPR          when it fires: 5 fields (minute hour day-of-month month day-of-week),
                       6 (seconds first) or 7 (…, year), or @hourly, @daily, @weekly …; quote it:
                       --cron '0 2 * * *' is every day at 02:00
  --tz ZONE            an IANA time zone, e.g. Europe/Berlin [the host's own]
  --overlap P          allow, or skip: skip a firing while the last one's job is unfinished [allow]
  --paused             create it paused (enabled false)
  --type TYPE          the job each firing submits (required), with --payload JSON|@FILE,
                       --priority P, --units N [1], --queue Q, --addon A, --max-attempts N
                       as for leasehold submit
Flags:
  --json               print the host's answer as JSON
${CLIENT_TARGET_HELP}
  -h, --help

Exit 2 on bad input: a flag, or a value the host refuses (a cron expression, a time zone, --units
over the whole capacity: the reason is printed, naming the flag); exit 1 when the host refuses
otherwise (no such schedule, a name already taken, a schedule edited by someone else under each
of edit's ${EDIT_ATTEMPTS} tries).`

/** The flags of the job template are submit's (less --key and --wait: each firing is a new job, followed by nobody). */
interface ScheduleFlags extends Omit<SubmitFlags, 'key' | 'wait'> {
  cron?: string
  tz?: string
  overlap?: string
  paused?: boolean
}

/** The flags of the job each firing submits: submit's, each filling one field of the template. */
const JOB_FLAGS = ['type', 'payload', 'priority', 'units', 'queue', 'addon', 'max-attempts'] as const
/** The flags of add, every one a field PATCH /api/schedules/{name} changes: edit takes them all (but --paused). */
const ADD_FLAGS = ['cron', 'tz', 'overlap', ...JOB_FLAGS] as const
const ACTIONS = ['add', 'edit', 'list', 'pause', 'resume', 'rm'] as const
type Action = (typeof ACTIONS)[number]

type ScheduleView = components['schemas']['Schedule']
type CreateBody = paths['/api/schedules']['post']['requestBody']['content']['application/json']
type ChangeBody = NonNullable<paths['/api/schedules/{name}']['patch']['requestBody']>['content']['application/json']
type JobTemplate = components['schemas']['JobTemplate']

/** The template's field that each job flag sets, as buildSubmit fills it. */
const JOB_FIELDS: Record<(typeof JOB_FLAGS)[number], keyof JobTemplate> = {
  type: 'job_type',
  payload: 'payload',
  priority: 'priority',
  units: 'cost_units',
  queue: 'queue',
  addon: 'addon_id',
  'max-attempts': 'max_attempts',
}

/** What `edit` changes: the PATCH body's own fields, and the job's fields given (merged into the template in force). */
export interface ScheduleEdit {
  change: ChangeBody
  job: Partial<JobTemplate>
}

/** The body of POST /api/schedules from the flags of `add`; anything missing or malformed is a ConfigError (exit 2). */
export function buildSchedule(name: string, flags: ScheduleFlags): CreateBody {
  if (flags.cron === undefined || flags.cron.trim() === '') throw new ConfigError("--cron is required (e.g. --cron '0 2 * * *', every day at 02:00)")
  if (flags.overlap !== undefined && !['allow', 'skip'].includes(flags.overlap)) {
    throw new ConfigError(`--overlap must be allow or skip (got "${flags.overlap}")`)
  }
  const body: CreateBody = { name, cron: flags.cron, job: buildSubmit(flags) }
  if (flags.tz !== undefined) body.timezone = flags.tz
  if (flags.overlap !== undefined) body.overlap = flags.overlap as CreateBody['overlap']
  if (flags.paused) body.enabled = false
  return body
}

/**
 * What the flags of `edit` change; none given is a ConfigError (exit 2), as is a value add would
 * refuse. PATCH replaces the job as a whole, so the job's flags give only the fields they name,
 * to be laid over the template in force: `--units 5` alone keeps the job's type and payload.
 */
export function buildEdit(flags: ScheduleFlags): ScheduleEdit {
  const given = ADD_FLAGS.filter((flag) => flags[flag] !== undefined)
  if (given.length === 0) throw new ConfigError(`schedule edit needs what to change: one or more of ${ADD_FLAGS.map((flag) => `--${flag}`).join(', ')}`)
  if (flags.cron !== undefined && flags.cron.trim() === '') throw new ConfigError("--cron must be an expression (e.g. --cron '0 2 * * *', every day at 02:00)")
  if (flags.overlap !== undefined && !['allow', 'skip'].includes(flags.overlap)) {
    throw new ConfigError(`--overlap must be allow or skip (got "${flags.overlap}")`)
  }
  const change: ChangeBody = {}
  if (flags.cron !== undefined) change.cron = flags.cron
  if (flags.tz !== undefined) change.timezone = flags.tz
  if (flags.overlap !== undefined) change.overlap = flags.overlap as ChangeBody['overlap']
  const jobFlags = JOB_FLAGS.filter((flag) => flags[flag] !== undefined)
  if (jobFlags.length === 0) return { change, job: {} }
  // buildSubmit checks each value as submit and add do; it requires a type, which the template in
  // force keeps when none is given: a stand-in here, and only the fields given are taken.
  const built = buildSubmit({ ...flags, type: flags.type ?? 'kept' }) as JobTemplate
  return { change, job: Object.fromEntries(jobFlags.map((flag) => [JOB_FIELDS[flag], built[JOB_FIELDS[flag]]])) as Partial<JobTemplate> }
}

const named = (name: string) => ({ params: { path: { name } } })

/** One line of `list` for the last run: when, what, and the job's state now. */
function lastRunText(schedule: ScheduleView): string {
  const run = schedule.last_run
  if (!run) return '-'
  if (run.outcome === 'SKIPPED') return `${run.fire_at} skipped (${run.reason ?? 'no reason given'})`
  return `${run.fire_at} job ${run.job_id ? shortId(run.job_id) : '?'} ${run.job_state ?? 'pruned'}`
}

/** `leasehold schedule add|edit|list|pause|resume|rm`. */
export async function scheduleCommand(argv: string[], env: NodeJS.ProcessEnv): Promise<number> {
  const { values: flags, positionals } = parseCommandLine<ScheduleFlags>(argv, ADD_FLAGS, ['paused', 'json'])
  const [action, name, ...extra] = positionals
  if (action === undefined) throw new ConfigError(`schedule needs one of ${ACTIONS.join(', ')} (try leasehold schedule --help)`)
  if (!(ACTIONS as readonly string[]).includes(action)) throw new ConfigError(`unknown schedule command "${action}" (one of ${ACTIONS.join(', ')})`)
  if (action === 'list' ? name !== undefined : !name) {
    throw new ConfigError(action === 'list' ? `schedule list takes no name (got "${name}")` : `schedule ${action} needs the schedule's NAME`)
  }
  if (name !== undefined) checkPathSegment(`schedule ${action}`, name, 'a schedule name')
  if (extra.length > 0) throw new ConfigError(`unexpected argument "${extra[0]}"`)
  if (flags.paused && action !== 'add') throw new ConfigError(`--paused belongs to schedule add (pause NAME and resume NAME switch a schedule)`)
  if (action !== 'add' && action !== 'edit') {
    const given = ADD_FLAGS.filter((flag) => flags[flag] !== undefined)
    if (given.length > 0) throw new ConfigError(`--${given[0]} belongs to schedule add and edit`)
  }
  const body = action === 'add' ? buildSchedule(name!, flags) : action === 'edit' ? buildEdit(flags) : undefined
  const target = await findHost(flags, env)
  return run(action as Action, name ?? '', body, target, flags.json === true)
}

/**
 * `edit`'s PATCH. Job fields given are laid over the template in force, read first: PATCH
 * replaces the job whole, and the user named only the fields to change. The PATCH names the
 * revision read (If-Match), so an edit landing between the read and the PATCH is never undone:
 * the host refuses (412), and the fields are laid over a fresh read, up to {@link EDIT_ATTEMPTS}
 * times. Without job fields nothing is read, and each field given replaces its own as it is.
 */
async function editSchedule(target: ClientTarget, name: string, edit: ScheduleEdit): Promise<{ schedule: ScheduleView }> {
  const api = hostApi(target)
  if (Object.keys(edit.job).length === 0) return answered(target, api.PATCH('/api/schedules/{name}', { ...named(name), body: edit.change }))
  for (let attempt = 1; ; attempt++) {
    const { schedule } = await answered(target, api.GET('/api/schedules/{name}', named(name)))
    const body = { ...edit.change, job: { ...schedule.job, ...edit.job } }
    try {
      return await answered(target, api.PATCH('/api/schedules/{name}', { ...named(name), body, headers: { 'if-match': entityTag(schedule.revision) } }))
    } catch (error) {
      if (!(error instanceof HostError) || error.code !== 'precondition_failed') throw error
      if (attempt === EDIT_ATTEMPTS) {
        throw new HostError(
          error.status,
          error.code,
          `schedule ${name} was changed by someone else during each of ${EDIT_ATTEMPTS} tries to edit it (another operator or program edits it now): this edit changed nothing; run it again`,
          error.body,
        )
      }
    }
  }
}

async function run(action: Action, name: string, body: CreateBody | ScheduleEdit | undefined, target: ClientTarget, json: boolean): Promise<number> {
  const api = hostApi(target)
  if (action === 'list') {
    const { schedules } = await answered(target, api.GET('/api/schedules'))
    if (json) console.log(JSON.stringify({ schedules }, null, 2))
    else if (schedules.length === 0) console.log('no schedules')
    else {
      // One column per fact: whether it fires, and what it does with a firing that overlaps.
      const rows = schedules.map((s) => [s.name, s.cron, s.timezone, s.state, s.overlap, s.next_fire_at ?? '-', lastRunText(s)])
      console.log(table(['NAME', 'CRON', 'ZONE', 'STATE', 'OVERLAP', 'NEXT', 'LAST RUN'], rows))
    }
    return 0
  }
  const answer =
    action === 'add'
      ? await answered(target, api.POST('/api/schedules', { body: body as CreateBody }))
      : action === 'rm'
        ? await answered(target, api.DELETE('/api/schedules/{name}', named(name)))
        : action === 'edit'
          ? await editSchedule(target, name, body as ScheduleEdit)
          : await answered(target, api.PATCH('/api/schedules/{name}', { ...named(name), body: { enabled: action === 'resume' } }))
  const { schedule } = answer
  if (json) console.log(JSON.stringify(answer, null, 2))
  else if (action === 'rm') console.log(`removed ${printable(schedule.name)}`)
  else if (action === 'pause') console.log(`paused ${printable(schedule.name)}`)
  else console.log(`${DONE_WORDS[action]} ${printable(schedule.name)}; ${firingWords(schedule)}`)
  return 0
}

const DONE_WORDS: Record<'add' | 'edit' | 'resume', string> = { add: 'added', edit: 'edited', resume: 'resumed' }

/** When a schedule fires next, or why it does not, naming the command that would make it fire. */
function firingWords(schedule: Pick<components['schemas']['Schedule'], 'name' | 'state' | 'next_fire_at'>): string {
  // A schedule's name is ASCII letters, digits and . _ : -: a word a shell takes as it is.
  const edit = `leasehold schedule edit ${printable(schedule.name)}`
  switch (schedule.state) {
    case 'enabled':
      return `next firing ${schedule.next_fire_at}`
    case 'paused':
      return 'it does not fire while paused'
    case 'finished':
      return `it fires no more: its cron has no firing left (give it one: ${edit} --cron …, or remove it)`
    case 'stopped':
      return `it does not fire: this host can no longer read its cron or time zone (give it one it reads: ${edit} --tz … or --cron …)`
  }
}
