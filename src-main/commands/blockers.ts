import { findHost } from './host-target'
import type { components } from '../../src-shared/api-types'
import { ConfigError, parseCommandLine, CLIENT_TARGET_HELP } from '../../src-shared/command-line'
import { shortId } from '../../src-shared/short-id'
import { heldByItsJob, holderName } from '../../src-shared/file-owner'
import { allBlockers, answered, hostApi, table } from './http-client'

export const BLOCKERS_HELP = `Usage: leasehold blockers [list] [flags]
       leasehold blockers resolve BLOCKER ACTION [flags]

A job that still finds its file held at its one retry (180 s after it was first denied) is
halted with a blocker report and waits, BLOCKED, for an operator's answer (docs/file-leases.md).
This lists the reports (GET /api/blockers) and answers one (POST /api/blockers/BLOCKER/resolve),
as the dashboard's blocker cards do.

Commands:
  list                       the open reports (the default): the file, who held it and for how
                             long at the halt, whether it holds it still (for how long now) or
                             no longer holds it, and the halted job; --state resolved or all for
                             the others
  resolve BLOCKER ACTION     answer a report with one of:
                               retry          requeue the halted job, to meet the file again
                               force_release  take the file from the holder the report names
                                              (if it still holds it: its job can no longer
                                              succeed; if it let go, nothing is taken and
                                              the line says so) and requeue the halted job
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
  const target = await findHost(flags, env)
  const api = hostApi(target)

  if (sub === 'list') {
    if (positionals.length > 0) throw new ConfigError(`blockers list takes no argument (got "${positionals[0]}")`)
    const state = STATES[(flags.state ?? 'open').toLowerCase() as keyof typeof STATES]
    if (state === undefined) throw new ConfigError(`--state must be open, resolved or all (got "${flags.state}")`)
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
  if (flags.by !== undefined && flags.by.trim() === '') throw new ConfigError('--by needs a name (leave it out to answer as operator)')
  const body = { action: action as Action, ...(flags.note === undefined ? {} : { note: flags.note }), ...(flags.by === undefined ? {} : { by: flags.by }) }
  const answer = await answered(target, api.POST('/api/blockers/{blocker_id}/resolve', { params: { path: { blocker_id: id } }, body }))
  if (flags.json) console.log(JSON.stringify(answer, null, 2))
  else console.log(resolvedLine(answer))
  return 0
}

/**
 * The answer in one line. A force release that took nothing says so: the holder the report
 * names had let go, and whoever holds the file now (never shown to the operator) keeps it.
 */
function resolvedLine(answer: components['schemas']['BlockerResolved']): string {
  const { blocker } = answer
  const taken =
    answer.taken_from_holder === false
      ? `; the holder had already let go of ${blocker.file}, nothing was taken`
      : answer.taken_from_holder
        ? `; ${blocker.file} was taken from ${holderName(blocker.holder)}, whose writes to it are refused from now on`
        : ''
  return `blocker ${blocker.blocker_id} resolved: ${blocker.resolution}${taken}; job ${answer.job_state === null ? '-' : answer.job_state}`
}

/**
 * The reports as a table: the file, who held it and for how long at the halt, and whether it
 * holds it still (for how long now) or no longer holds it; the halted job (and, for resolved ones,
 * the answer, and a force release that took nothing).
 */
export function blockerTable(blockers: readonly Blocker[], withAnswer = false): string {
  const rows = blockers.map((b) => [
    b.blocker_id,
    b.file,
    `${holderName(b.holder)}${b.holder.job_id && !heldByItsJob(b.holder) ? ` (job ${shortId(b.holder.job_id)})` : ''} for ${b.age_s} s at the halt; ${b.holder.held_s === null ? 'no longer holds it' : `holds it still (${b.holder.held_s} s)`}`,
    b.requester.job_id ? shortId(b.requester.job_id) : b.requester.owner_id,
    ...(withAnswer ? [b.state === 'OPEN' ? 'open' : `${b.resolution} by ${b.resolved_by}${b.taken_from_holder === false ? ' (nothing taken: the holder had let go)' : ''}`] : []),
  ])
  return table(['ID', 'FILE', 'HELD BY', 'HALTED', ...(withAnswer ? ['ANSWER'] : [])], rows)
}
