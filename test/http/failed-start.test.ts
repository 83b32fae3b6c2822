/**
 * A start is whole or nothing: one that fails leaves the data dir as it found it. It takes its
 * port before it starts anything that runs a job or fires a schedule, and a mark it wrote in the
 * database goes with it, so the next start neither misses a firing nor takes the failed start for
 * a killed host whose log was lost.
 */
import BetterSqlite3 from 'better-sqlite3'
import { createServer, type Server } from 'node:net'
import { join } from 'node:path'
import { afterEach, expect, test } from 'vitest'
import { ManualClock } from '../../src-main/engine/rules/clock'
import { startTestHost, type TestHost } from '../helpers/host'
import { API_T0, body, post, QUEUE } from './support'

const hosts: TestHost[] = []
const servers: Server[] = []
afterEach(async () => {
  for (const host of hosts.splice(0)) await host.dispose()
  for (const server of servers.splice(0)) await new Promise((resolve) => server.close(resolve))
})

/** A port another program listens on. */
async function takenPort(): Promise<number> {
  const server = createServer()
  servers.push(server)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return (server.address() as { port: number }).port
}

/** The settings a host keeps about its own open (its mark), and the jobs, as the file holds them. */
function fileState(dataDir: string): { marks: string[]; jobs: number } {
  const db = new BetterSqlite3(join(dataDir, 'leasehold.db'), { readonly: true })
  try {
    const marks = (db.prepare("SELECT key FROM settings WHERE key LIKE 'host_open%' ORDER BY key").all() as { key: string }[]).map((row) => row.key)
    const { jobs } = db.prepare('SELECT COUNT(*) AS jobs FROM jobs').get() as { jobs: number }
    return { marks, jobs }
  } finally {
    db.close()
  }
}

test('a start that cannot take its port fires no missed schedule and leaves no mark: the next start fires it, and says nothing of a killed host', async () => {
  const clock = new ManualClock(API_T0)
  const first = await startTestHost({}, { clock })
  await post(first, '/api/schedules', { name: 'every-minute', cron: '* * * * *', timezone: 'UTC', job: { job_type: 'tick', cost_units: 1 } })
  await first.stop()
  clock.advance(5 * 60_000) // firings missed while no host ran

  const port = await takenPort()
  await expect(startTestHost({ dataDir: first.dataDir, port }, { clock })).rejects.toThrow(/in use/)
  expect(fileState(first.dataDir)).toEqual({ marks: [], jobs: 0 })

  const lines: string[] = []
  const next = await startTestHost({ dataDir: first.dataDir }, { clock, log: (line) => lines.push(line) })
  hosts.push(next)
  expect(lines.filter((line) => /carries the mark of a host|unclean/.test(line))).toEqual([])
  expect((await body(await next.call(`${QUEUE}/jobs`))).jobs).toHaveLength(1) // the catch-up run, once
})

test('a start that failed after a killed host leaves that host\'s mark and that it recovered the log: the next start checks the file and does not call the log lost', async () => {
  const host = await startTestHost()
  const dataDir = host.dataDir
  await host.stop()
  // As a killed host leaves it: its mark in the database, and its log beside it.
  const db = new BetterSqlite3(join(dataDir, 'leasehold.db'))
  db.prepare("INSERT INTO settings (key, value) VALUES ('host_open', 'pid 4242 since 2026-12-01T10:00:00.000Z')").run()
  db.close()

  const port = await takenPort()
  await expect(startTestHost({ dataDir, port })).rejects.toThrow(/in use/)
  expect(fileState(dataDir).marks).toEqual(['host_open', 'host_open_log_recovered'])

  const lines: string[] = []
  const next = await startTestHost({ dataDir }, { log: (line) => lines.push(line) })
  hosts.push(next)
  expect(lines.filter((line) => line.includes('carries the mark of a host'))).toEqual([])
  expect(await next.integrityCheck).toMatchObject({ ok: true }) // the check a killed host's file waits for
  await next.stop()
  expect(fileState(dataDir).marks).toEqual([])
})
