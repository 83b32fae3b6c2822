import type { CapacityFigures } from '../engine/capacity'
import type { StorageAnswer } from '../http/system'
import { resolveClientTarget } from '../client-config'
import { shortId } from '../short-id'
import { callHost, parseFlags, table, TARGET_HELP } from './http-client'

export const STATUS_HELP = `Usage: leasehold status [flags]

Shows the host at a glance: capacity (total units, the busy rating and whether it is measured
or set, usable, leased and available units), how many leases are active, the workers, the
open blockers (jobs halted on a held file, waiting for an operator), and the database's size
on disk with how long finished jobs are kept (--retain-days of leasehold serve). Jobs that
cost more than the total capacity (it was lowered below their cost) are reported: they cannot
run until it is raised again. Jobs show as the last 8 characters of their id (…3f9a0c12), which
\`leasehold jobs\` lists whole; --json has every id.

Flags:
  --json               print {capacity, leases, jobs: {over_capacity}, workers, blockers, storage} as JSON
${TARGET_HELP}
  -h, --help`

interface StatusFlags {
  url?: string
  token?: string
  'data-dir'?: string
  json?: boolean
}

/** GET /api/capacity answers the engine's figures as they are. */
type Capacity = CapacityFigures

interface Worker {
  worker_id: string
  kind: string
  pid: number | null
  state: string
  current_job_ids: string[]
  last_seen_at: string | null
}

interface Blocker {
  blocker_id: string
  file: string
  holder: { owner_id: string; job_id: string | null }
  age_s: number
  requester: { owner_id: string; job_id: string | null }
  created_at: string
}

/** `leasehold status`: capacity, active leases, workers and open blockers. */
export async function statusCommand(argv: string[], env: NodeJS.ProcessEnv): Promise<number> {
  const flags = parseFlags<StatusFlags>(argv, [], ['json'])
  const target = resolveClientTarget(flags, env)
  const [capacity, snapshot, workers, blockers, storage] = await Promise.all([
    callHost<Capacity>(target, 'GET', '/api/capacity'),
    callHost<{ leases: { active: number }; jobs: { over_capacity: number } }>(target, 'GET', '/api/scheduler/stats/snapshot'),
    callHost<{ workers: Worker[] }>(target, 'GET', '/api/workers'),
    callHost<{ blockers: Blocker[] }>(target, 'GET', '/api/blockers?state=OPEN'),
    callHost<StorageAnswer>(target, 'GET', '/api/storage'),
  ])
  if (flags.json) {
    console.log(
      JSON.stringify(
        {
          url: target.url,
          capacity,
          leases: { active: snapshot.leases.active },
          jobs: { over_capacity: snapshot.jobs.over_capacity },
          workers: workers.workers,
          blockers: blockers.blockers,
          storage,
        },
        null,
        2,
      ),
    )
    return 0
  }
  const c = capacity
  const lines = [
    `host      ${target.url}`,
    `capacity  total ${c.total_units}, busy ${c.busy_rating} (${c.busy_mode}), usable ${c.usable}, leased ${c.leased}, available ${c.available}`,
    `leases    ${snapshot.leases.active} active`,
  ]
  const stuck = snapshot.jobs.over_capacity
  if (stuck > 0) {
    lines.push(
      `warning   ${stuck} waiting job${stuck === 1 ? '' : 's'} cost${stuck === 1 ? 's' : ''} more than the total capacity (${c.total_units} units) and cannot run: raise total_units or cancel ${stuck === 1 ? 'it' : 'them'} (leasehold jobs shows which)`,
    )
  }
  lines.push(
    `workers   ${workers.workers.length}`,
  )
  if (workers.workers.length > 0) {
    const rows = workers.workers.map((w) => [
      w.worker_id,
      w.kind,
      w.state,
      w.current_job_ids.length > 0 ? w.current_job_ids.map(shortId).join(',') : '-',
      w.last_seen_at ?? '-',
    ])
    lines.push(indent(table(['ID', 'KIND', 'STATE', 'JOBS', 'LAST SEEN'], rows)))
  }
  lines.push(`blockers  ${blockers.blockers.length} open`)
  if (blockers.blockers.length > 0) {
    const rows = blockers.blockers.map((b) => [
      b.blocker_id,
      b.file,
      `${b.holder.owner_id}${b.holder.job_id ? ` (job ${shortId(b.holder.job_id)})` : ''} for ${b.age_s} s`,
      b.requester.job_id ? shortId(b.requester.job_id) : b.requester.owner_id,
    ])
    lines.push(indent(table(['ID', 'FILE', 'HELD BY', 'HALTED'], rows)))
  }
  lines.push(`storage   ${storageLine(storage)}`)
  console.log(lines.join('\n'))
  return 0
}

const mb = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MB`

/** "database 12.3 MB (file 10.1 MB + WAL 2.2 MB); finished jobs kept 7 days, 1,234 deleted at 2026-…" */
function storageLine(s: StorageAnswer): string {
  const size = `database ${mb(s.database_bytes)} (file ${mb(s.file_bytes)} + WAL ${mb(s.wal_bytes)})`
  const kept = s.retain_days === 0 ? 'finished jobs kept forever' : `finished jobs kept ${s.retain_days} day${s.retain_days === 1 ? '' : 's'}`
  const last = s.last_prune ? `, ${s.last_prune.jobs_deleted.toLocaleString('en-US')} deleted by the last pass at ${s.last_prune.at}` : ''
  return `${size}; ${kept}${last}`
}

const indent = (text: string) =>
  text
    .split('\n')
    .map((line) => `  ${line}`)
    .join('\n')
