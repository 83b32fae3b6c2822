import type { StorageAnswer } from '../http/system'
import { printable } from '../../src-shared/printable'
import type { RedisHealth } from '../http/views/system'
import { prefixTakenMessage } from '../../src-shared/redis-streams'
import { stillRunWithoutRedis } from '../../src-shared/without-redis'
import { findHost } from './host-target'
import { shortId } from '../../src-shared/short-id'
import { parseFlags, CLIENT_TARGET_HELP } from '../../src-shared/command-line'
import { blockerTable } from './blockers'
import { allBlockers, answered, hostApi } from './http-client'
import { table } from './text-table'

/** How many of a worker's jobs its row shows: a local worker may run dozens at once, which would make its row as wide. */
const SHOWN_JOBS = 3

/** A worker's jobs in the table: the first few by the end of their ids, then how many more ("…3f9a0c12,…77aa00bb,…01be3cc2 +47 more"). */
function jobsCell(ids: readonly string[]): string {
  if (ids.length === 0) return '-'
  const shown = ids.slice(0, SHOWN_JOBS).map(shortId).join(',')
  return ids.length > SHOWN_JOBS ? `${shown} +${ids.length - SHOWN_JOBS} more` : shown
}

export const STATUS_HELP = `Usage: leasehold status [flags]

Shows the host at a glance: capacity (total units, the busy rating and whether it is measured
or set, usable, leased and available units), how many leases are active, the workers, the
open blockers (jobs halted on a held file, waiting for an operator), and the database's size
on disk with how long finished jobs are kept (--retain-days of leasehold serve), and whether
the host is read-only (its disk was full at start: it takes writes again once space returns).
A host that carries its queues over Redis (serve --redis) says whether Redis answers (and for
how long it has not), how many messages wait in its outbox for Redis to come back (jobs are taken
all the same), and whether it stopped using Redis because another host uses its --redis-prefix. Jobs that
cost more than the total capacity (it was lowered below their cost) are reported: they cannot
run until it is raised again. Jobs show as the last 8 characters of their id (…3f9a0c12), which
\`leasehold jobs\` lists whole; a worker running more than ${SHOWN_JOBS} jobs shows ${SHOWN_JOBS} and how many
more; --json has every id.

Flags:
  --json               print {url, capacity, leases, jobs: {over_capacity}, workers, blockers, storage, redis?} as JSON
                       (url is the address of the host that answered, the table's host line;
                       storage.mode is read_write or read_only, storage.reason why,
                       storage.read_only.detail what to do)
${CLIENT_TARGET_HELP}
  -h, --help`

interface StatusFlags {
  url?: string
  token?: string
  'data-dir'?: string
  json?: boolean
}

/** `leasehold status`: capacity, active leases, workers and open blockers. */
export async function statusCommand(argv: string[], env: NodeJS.ProcessEnv): Promise<number> {
  const flags = parseFlags<StatusFlags>(argv, [], ['json'])
  const target = await findHost(flags, env)
  const api = hostApi(target)
  const [health, capacity, snapshot, workers, blockers, storage] = await Promise.all([
    answered(target, api.GET('/api/health')),
    answered(target, api.GET('/api/capacity')),
    answered(target, api.GET('/api/scheduler/stats/snapshot')),
    answered(target, api.GET('/api/workers')),
    allBlockers(target, 'OPEN').then((blockers) => ({ blockers })),
    answered(target, api.GET('/api/storage')),
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
          storage: { ...storage, mode: health.storage, reason: health.reason ?? null },
          ...(health.redis ? { redis: health.redis } : {}),
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
  const silent = workers.workers.filter((w) => w.state === 'silent').length
  lines.push(`workers   ${workers.workers.length}${silent > 0 ? ` (${silent} silent)` : ''}`)
  if (workers.workers.length > 0) {
    const rows = workers.workers.map((w) => [
      w.worker_id,
      w.kind,
      w.state,
      jobsCell(w.current_job_ids),
      w.last_seen_at ?? '-',
    ])
    lines.push(indent(table(['ID', 'KIND', 'STATE', 'JOBS', 'LAST SEEN'], rows)))
  }
  lines.push(`blockers  ${blockers.blockers.length} open`)
  if (blockers.blockers.length > 0) lines.push(indent(blockerTable(blockers.blockers)))
  if (health.storage === 'read_only') {
    lines.push(printable(`storage   READ-ONLY (${health.reason ?? 'disk full'}): ${storage.read_only?.detail ?? 'reads work, every write is refused until space returns on the disk of the data dir'}`))
    lines.push(printable(`          ${storageLine(storage)}`))
  } else lines.push(printable(`storage   ${storageLine(storage)}`))
  if (health.redis) lines.push(printable(`redis     ${redisLine(health.redis, workers.workers)}`))
  console.log(lines.join('\n'))
  return 0
}

/**
 * "connected to redis://…, 0 messages waiting", "NOT connected (redis://…, no answer for 8 s): 12
 * messages wait in the outbox, the oldest 30 s", or "NOT USED: another Leasehold host (…) uses the
 * Redis prefix …".
 */
function redisLine(r: RedisHealth, workers: readonly { kind: string }[]): string {
  const run = stillRun(workers)
  const waiting = `${r.waiting.toLocaleString('en-US')} message${r.waiting === 1 ? '' : 's'} wait${r.waiting === 1 ? 's' : ''} in the outbox`
  const oldest = r.oldest_wait_ms === null ? '' : `, the oldest ${Math.round(r.oldest_wait_ms / 1000)} s`
  if (r.prefix_taken_by !== null) return `NOT USED: ${prefixTakenMessage(r.prefix, r.url, r.prefix_taken_by)}, then restart it; ${run}; ${waiting}${oldest}`
  if (r.connected && r.refused) return `connected to ${r.url}, and REFUSING what the host sends (${r.refused}): ${run}; ${waiting}${oldest}, published once Redis takes them`
  if (r.connected) return `connected to ${r.url}; ${waiting}${oldest}`
  const silence = r.refused ? `: ${r.refused}` : r.unanswered_ms === null ? '' : `, no answer for ${Math.round(r.unanswered_ms / 1000)} s`
  return `NOT connected (${r.url}${silence}): ${run}; ${waiting}${oldest}, published when it is back`
}

/** Whose jobs still run while Redis is not used, as the status line says it (stillRunWithoutRedis has the rule). */
function stillRun(workers: readonly { kind: string }[]): string {
  switch (stillRunWithoutRedis(workers)) {
    case 'all':
      return 'jobs still run'
    case 'none':
      return 'the only workers, remote ones over Redis, run nothing meanwhile'
    case 'some':
      return 'the jobs of local workers and workers over HTTP still run; remote workers over Redis run nothing meanwhile'
  }
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
