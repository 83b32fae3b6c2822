import { findHost } from './host-target'
import type { components } from '../../src-shared/api-types'
import { checkActorName, checkPathSegment, ConfigError, parseCommandLine, CLIENT_TARGET_HELP } from '../../src-shared/command-line'
import { MAX_ID_CHARS } from '../../src-shared/limits'
import { answered, hostApi } from './http-client'
import { printable } from '../../src-shared/printable'
import { table } from './text-table'

export const QUEUE_HELP = `Usage: leasehold queue list [flags]
       leasehold queue pause QUEUE [flags]
       leasehold queue resume QUEUE [flags]

Lists the queues (GET /api/queues) with their jobs by state and whether each is paused, or
pauses or resumes one (POST /api/queues/QUEUE/pause, /resume). A paused queue's jobs are
neither claimed nor leased by any worker until it is resumed; jobs already running finish,
and submits are still accepted. A pause outlives a restart of the host.

Commands:
  list                 every queue that has jobs other than DONE ones, or is paused: its jobs
                       waiting (QUEUED and claimed), running, blocked, failed, canceled and
                       timed out (DONE jobs are not counted)
  pause QUEUE          pause a queue (it need not have jobs yet)
  resume QUEUE         resume a paused queue

Flags:
  --by NAME            who asks, recorded in the queue's event (pause, resume)
  --json               print the host's answer as JSON
${CLIENT_TARGET_HELP}
  -h, --help`

interface QueueFlags {
  url?: string
  token?: string
  'data-dir'?: string
  by?: string
  json?: boolean
}

/** A queue as the host shows it: paused or not, and (in the list) its jobs by state. */
type QueueView = components['schemas']['QueuePause'] & Partial<Pick<components['schemas']['QueueSummary'], 'counts'>>

const SUBCOMMANDS = ['list', 'pause', 'resume'] as const
/** A flag of another subcommand, named as that one's: `queue list --by me` is not an unknown flag. */
const FLAG_HOMES: Readonly<Record<string, string>> = { by: 'queue pause and resume' }

/** `leasehold queue list|pause|resume`. */
export async function queueCommand(argv: string[], env: NodeJS.ProcessEnv): Promise<number> {
  const [sub, ...rest] = argv
  if (sub === undefined || !(SUBCOMMANDS as readonly string[]).includes(sub)) {
    throw new ConfigError(`queue needs one of ${SUBCOMMANDS.join(', ')}${sub === undefined ? '' : ` (got "${sub}")`}; see leasehold queue --help`)
  }
  const { values: flags, positionals } = parseCommandLine<QueueFlags>(rest, sub === 'list' ? [] : ['by'], ['json'], true, FLAG_HOMES)
  const name = queueName(sub, positionals)
  if (flags.by !== undefined) checkActorName('by', flags.by)
  const target = await findHost(flags, env)

  if (sub === 'list') {
    const answer = await answered(target, hostApi(target).GET('/api/queues'))
    if (flags.json) console.log(JSON.stringify(answer, null, 2))
    else if (answer.queues.length === 0) console.log('no queues with jobs (DONE jobs are not counted), and none paused')
    else console.log(queueTable(answer.queues))
    return 0
  }
  const path = sub === 'pause' ? '/api/queues/{queue}/pause' : '/api/queues/{queue}/resume'
  const { queue } = await answered(target, hostApi(target).POST(path, { params: { path: { queue: name! } }, body: flags.by === undefined ? {} : { requested_by: flags.by } }))
  if (flags.json) console.log(JSON.stringify({ queue }, null, 2))
  // The queue's name and who paused it are free text, shown escaped as the list shows them.
  else console.log(printable(queue.paused ? `queue ${queue.queue} paused${pausedSince(queue)}` : `queue ${queue.queue} active`))
  return 0
}

/**
 * The QUEUE of pause and resume (list takes none): exactly one word, a name a queue may have. An
 * empty name would reach the host as /api/queues//pause, and "." or ".." as a path with the
 * segment dropped: routes that do not exist (checkPathSegment, shared with schedule and blockers).
 */
function queueName(sub: string, words: string[]): string | undefined {
  if (sub === 'list') {
    if (words.length > 0) throw new ConfigError(`queue list takes no QUEUE (got "${words[0]}")`)
    return undefined
  }
  const [name, ...extra] = words
  if (name === undefined || name.trim() === '') throw new ConfigError(`queue ${sub} needs the name of a queue: leasehold queue ${sub} QUEUE`)
  if (extra.length > 0) throw new ConfigError(`queue ${sub} takes one QUEUE (got also "${extra[0]}"); run it once for each queue`)
  checkPathSegment(`queue ${sub}`, name, 'a queue name')
  // Said of QUEUE here: the host's refusal would name the field, which reads as a --queue flag.
  if (name.length > MAX_ID_CHARS) throw new ConfigError(`queue ${sub}: a queue name is at most ${MAX_ID_CHARS} characters (got ${name.length})`)
  return name
}

const pausedSince = (q: QueueView) => ` since ${q.paused_at}${q.paused_by ? ` by ${q.paused_by}` : ''}`

const sum = (counts: Record<string, number> | undefined, states: string[]) => states.reduce((total, state) => total + (counts?.[state] ?? 0), 0)

export function queueTable(queues: QueueView[]): string {
  const rows = queues.map((q) => [
    q.queue,
    q.paused ? `paused${pausedSince(q)}` : 'active',
    String(sum(q.counts, ['QUEUED', 'CLAIMED', 'PREPARING', 'LEASE_PENDING'])),
    String(sum(q.counts, ['LEASED', 'RUNNING'])),
    String(sum(q.counts, ['BLOCKED'])),
    String(sum(q.counts, ['FAILED'])),
    String(sum(q.counts, ['CANCELED'])),
    String(sum(q.counts, ['TIMEOUT'])),
  ])
  return table(['QUEUE', 'STATE', 'WAITING', 'RUNNING', 'BLOCKED', 'FAILED', 'CANCELED', 'TIMEOUT'], rows)
}
