import { findHost } from './host-target'
import type { components } from '../../src-shared/api-types'
import { checkActorName, checkPathSegment, ConfigError, parseCommandLine, CLIENT_TARGET_HELP } from '../../src-shared/command-line'
import { idEnd, idsEndingWith, SHORT_ID_END, shortId } from '../../src-shared/short-id'
import { heldByItsJob, heldPath, holderName } from '../../src-shared/file-owner'
import type { ClientTarget } from '../../src-shared/client-target'
import { allBlockers, answered, HostError, hostApi } from './http-client'
import { printable } from '../../src-shared/printable'
import { table } from './text-table'

export const BLOCKERS_HELP = `Usage: leasehold blockers [list] [flags]
       leasehold blockers resolve BLOCKER ACTION [flags]

A job that still finds its file held at its one retry (180 s after it was first denied) is
halted with a blocker report and waits, BLOCKED, for an operator's answer (docs/file-leases.md).
This lists the reports (GET /api/blockers) and answers one (POST /api/blockers/BLOCKER/resolve),
as the dashboard's blocker cards do.

Commands:
  list                       the open reports (the default): the file, who held it and for how
                             long at the halt, whether it holds it still (for how long now),
                             its job holds it again under a new attempt, or it
                             no longer holds it, and the halted job; --state resolved or all for
                             the others
  resolve BLOCKER ACTION     answer a report (BLOCKER: its id, or the end of it as a halted
                             job's waiting reason prints it, …d17c7b59) with one of:
                               retry          requeue the halted job, to meet the file again
                               force_release  take the file from the holder the report names
                                              (if it still holds it: its job can no longer
                                              succeed; if it let go, nothing is taken and
                                              the line says so) and requeue the halted job;
                                              a file taken is kept for the halted job for
                                              180 s or until it takes it, every other owner
                                              (the old holder too) refused it meanwhile
                               cancel         cancel the halted job

Flags:
  --state open|resolved|all  which reports to list (default open)
  --note TEXT                why, recorded with the answer (resolve)
  --by NAME                  who answers, recorded with it (resolve; default operator)
  --json                     print the host's answer as JSON
${CLIENT_TARGET_HELP}
  -h, --help`

interface BlockersFlags {
  url?: string
  token?: string
  'data-dir'?: string
  state?: string
  note?: string
  by?: string
  json?: boolean
}

type Blocker = components['schemas']['Blocker']
type Action = Blocker['resolution'] & string

const ACTIONS: readonly Action[] = ['retry', 'force_release', 'cancel']
/** Where each flag of `blockers` belongs, for one given to the other subcommand. */
const FLAG_HOMES: Readonly<Record<string, string>> = { state: 'blockers list', note: 'blockers resolve', by: 'blockers resolve' }
const STATES = { open: 'OPEN', resolved: 'RESOLVED', all: 'all' } as const

/** `leasehold blockers [list] | resolve BLOCKER ACTION`. */
export async function blockersCommand(argv: string[], env: NodeJS.ProcessEnv): Promise<number> {
  const sub = argv[0] === undefined || argv[0].startsWith('-') ? 'list' : argv[0]
  const rest = sub === argv[0] ? argv.slice(1) : argv
  if (sub !== 'list' && sub !== 'resolve') throw new ConfigError(`blockers needs list or resolve (got "${sub}"); see leasehold blockers --help`)
  const { values: flags, positionals } = parseCommandLine<BlockersFlags>(rest, sub === 'list' ? ['state'] : ['note', 'by'], ['json'], true, FLAG_HOMES)
  // Every usage mistake is found before the host is looked for: exit 2 whether or not one runs.
  if (sub === 'list') {
    if (positionals.length > 0) throw new ConfigError(`blockers list takes no argument (got "${positionals[0]}")`)
    const state = STATES[(flags.state ?? 'open').toLowerCase() as keyof typeof STATES]
    if (state === undefined) throw new ConfigError(`--state must be open, resolved or all (got "${flags.state}")`)
    const target = await findHost(flags, env)
    const blockers = await allBlockers(target, state)
    if (flags.json) console.log(JSON.stringify({ blockers }, null, 2))
    else if (blockers.length === 0) console.log(state === 'OPEN' ? 'no open blockers: no job waits for an answer' : 'no blockers')
    else console.log(blockerTable(blockers, state !== 'OPEN'))
    return 0
  }
  const [id, action, ...extra] = positionals
  if (id === undefined || action === undefined) throw new ConfigError('blockers resolve needs a blocker id and an action: leasehold blockers resolve BLOCKER retry|force_release|cancel')
  if (extra.length > 0) throw new ConfigError(`blockers resolve takes one blocker and one action (got also "${extra[0]}")`)
  if (!(ACTIONS as readonly string[]).includes(action)) throw new ConfigError(`the action must be retry, force_release or cancel (got "${action}")`)
  checkPathSegment('blockers resolve', id, 'a blocker id')
  if (flags.by !== undefined) checkActorName('by', flags.by)
  if (SHORT_ID_END.test(id)) throw new ConfigError(`"${id}" is too short to name a blocker: give its whole id, or its end with 8 characters or more (…d17c7b59)`)
  const target = await findHost(flags, env)
  const body = { action: action as Action, ...(flags.note === undefined ? {} : { note: flags.note }), ...(flags.by === undefined ? {} : { by: flags.by }) }
  const blockerId = await wholeBlockerId(target, id)
  const answer = await answered(target, hostApi(target).POST('/api/blockers/{blocker_id}/resolve', { params: { path: { blocker_id: blockerId } }, body }))
  if (flags.json) console.log(JSON.stringify(answer, null, 2))
  else console.log(resolvedLine(answer))
  return 0
}

/**
 * The blocker `given` names: by its whole id, or by its end as the waiting reasons and `jobs show`
 * print it (…d17c7b59), found among every report (a handful: each is one halted job). An end
 * that ends no report's id is the host's `blocker_not_found` (exit 1); one that ends several is a
 * usage error naming them (exit 2).
 */
async function wholeBlockerId(target: ClientTarget, given: string): Promise<string> {
  const end = idEnd(given)
  if (end === undefined) return given
  const ids = idsEndingWith((await allBlockers(target, 'all')).map((blocker) => blocker.blocker_id), end)
  if (ids.length === 1) return ids[0]!
  if (ids.length === 0) throw new HostError(404, 'blocker_not_found', `No blocker's id ends with ${end}`, {})
  throw new ConfigError(`${end} ends the ids of ${ids.length} blockers (${ids.join(', ')}): give more of the id`)
}

/**
 * The answer in one line. A force release that took nothing says so: the holder the report
 * names had let go, and whoever holds the file now (never shown to the operator) keeps it.
 */
function resolvedLine(answer: components['schemas']['BlockerResolved']): string {
  const { blocker } = answer
  const taken =
    answer.taken_from_holder === false
      ? `; the holder had already let go of ${blocker.holder.file}, nothing was taken`
      : answer.taken_from_holder
        ? `; ${blocker.holder.file} was taken from ${holderName(blocker.holder)}, whose writes to it are refused from now on, and ${blocker.file} is kept for ${blocker.requester.job_id ? `job ${shortId(blocker.requester.job_id)}` : blocker.requester.owner_id} for 180 s or until it takes it`
        : ''
  // A report whose requester named no job lease names no job: the answer had none to requeue or cancel.
  const job = answer.job_state === null ? `the report names no job, so none was ${blocker.resolution === 'cancel' ? 'canceled' : 'requeued'}` : `job ${answer.job_state}`
  // The file and the owner ids are free text: control characters are shown escaped, as in the list.
  return printable(`blocker ${blocker.blocker_id} resolved: ${blocker.resolution}${taken}; ${job}`)
}

/**
 * The reports as a table: the file, who held it and for how long at the halt, and whether it
 * holds it still (for how long now), its job holds it again, or it no longer holds it; the halted job (and, for resolved ones,
 * the answer, and a force release that took nothing).
 */
/** Whether the holder holds the file as the report is read: still, again (its job, under a new attempt), or no longer. */
function holdsNow(holder: Blocker['holder']): string {
  if (holder.held_s === null) return 'no longer holds it'
  return holder.holds_again ? `its job holds it again under a new attempt (${holder.held_s} s)` : `holds it still (${holder.held_s} s)`
}

export function blockerTable(blockers: readonly Blocker[], withAnswer = false): string {
  const rows = blockers.map((b) => [
    b.blocker_id,
    b.file,
    `${holderName(b.holder)}${b.holder.job_id && !heldByItsJob(b.holder) ? ` (job ${shortId(b.holder.job_id)})` : ''}${heldPath(b.file, b.holder.file)} for ${b.age_s} s at the halt; ${holdsNow(b.holder)}`,
    b.requester.job_id ? shortId(b.requester.job_id) : b.requester.owner_id,
    ...(withAnswer ? [b.state === 'OPEN' ? 'open' : `${b.resolution} by ${b.resolved_by}${b.taken_from_holder === false ? ' (nothing taken: the holder had let go)' : ''}`] : []),
  ])
  return table(['ID', 'FILE', 'HELD BY', 'HALTED', ...(withAnswer ? ['ANSWER'] : [])], rows)
}
