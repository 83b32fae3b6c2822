/**
 * A backup taken while the host serves (POST /api/storage/backup, `leasehold backup`): SQLite's
 * backup API through the host's own connection, so the copy is whole while commits go on, where
 * a `cp` of the file can be torn. A start opens it as it is: restored with the host stopped, it
 * is the database.
 */
import BetterSqlite3 from 'better-sqlite3'
import { execFileSync } from 'node:child_process'
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { basename, join } from 'node:path'
import { afterEach, describe, expect, test } from 'vitest'
import { startTestHost, type TestHost } from '../helpers/host'
import { runCliAsync } from '../helpers/process'
import { body, QUEUE, submit } from './support'

const hosts: TestHost[] = []
afterEach(async () => {
  for (const host of hosts.splice(0)) await host.dispose()
})

describe('a backup while the host serves', () => {
  test('is a whole database holding every job acknowledged before it was asked, written into <data-dir>/backups, private, and never left half written', async () => {
    const host = await startTestHost()
    hosts.push(host)
    const before: string[] = []
    for (let i = 0; i < 200; i++) before.push((await submit(host)).job_id)
    // Submits go on while the copy reads the file.
    let going = true
    const during = (async () => {
      while (going) await submit(host)
    })()
    const answer = await host.call('/api/storage/backup', { method: 'POST' })
    going = false
    await during
    const backup = await body(answer)
    expect(answer.status, JSON.stringify(backup)).toBe(201)
    expect(backup.path).toMatch(new RegExp(`^${join(host.dataDir, 'backups', 'leasehold-')}[0-9TZ-]+\\.db$`))
    expect(statSync(backup.path).mode & 0o777).toBe(0o600)
    expect(statSync(backup.path).size).toBe(backup.bytes)
    expect(readdirSync(join(host.dataDir, 'backups')).filter((name) => name.endsWith('.partial'))).toEqual([])
    const copy = new BetterSqlite3(backup.path, { readonly: true })
    expect(copy.pragma('integrity_check', { simple: true })).toBe('ok')
    const ids = new Set(copy.prepare('SELECT id FROM jobs').pluck().all() as string[])
    copy.close()
    expect(before.filter((id) => !ids.has(id))).toEqual([])
  })

  test('a copy cut short by a host killed in the middle of it (its .partial file and journal left) is removed by the next backup', async () => {
    const host = await startTestHost()
    hosts.push(host)
    const backups = join(host.dataDir, 'backups')
    mkdirSync(backups, { recursive: true })
    const leftover = join(backups, 'leasehold-2026-01-01T00-00-00-000Z.db.partial')
    writeFileSync(leftover, 'half a copy')
    writeFileSync(`${leftover}-journal`, 'its journal')
    writeFileSync(join(backups, 'notes.txt'), 'the operator’s') // not a copy's: left alone
    const answer = await host.call('/api/storage/backup', { method: 'POST' })
    expect(answer.status).toBe(201)
    const { path } = await body(answer)
    expect(readdirSync(backups).sort()).toEqual([basename(path), 'notes.txt'])
  })

  test('a backups path that names no folder (a file, a link to nothing, a link to a file) is 409 backup_folder_unusable saying what is wrong and what to do, not the disk\'s storage_error; leasehold backup says the same', async () => {
    const host = await startTestHost()
    hosts.push(host)
    const backups = join(host.dataDir, 'backups')
    const nowhere = join(host.dataDir, 'nowhere')
    const aFile = join(host.dataDir, 'a-file')
    writeFileSync(aFile, 'x')
    const cases: [() => void, RegExp][] = [
      [() => writeFileSync(backups, 'x'), new RegExp(`${backups} is a file, not a folder: move it away`)],
      [() => symlinkSync(nowhere, backups), new RegExp(`${backups} is a link to ${nowhere}, which does not exist: make that folder, or remove the link`)],
      [() => symlinkSync('a-file', backups), new RegExp(`${backups} is a link to ${aFile}, which is a file, not a folder`)],
    ]
    for (const [put, said] of cases) {
      rmSync(backups, { force: true })
      put()
      const answer = await host.call('/api/storage/backup', { method: 'POST' })
      const error = await body(answer)
      expect(answer.status, JSON.stringify(error)).toBe(409)
      expect(error).toEqual({ code: 'backup_folder_unusable', detail: expect.stringMatching(said) })
      const printed = await runCliAsync(['backup', '--url', host.url, '--token', host.token])
      expect(printed.status).toBe(1)
      expect(printed.stderr).toMatch(said)
      expect(printed.stderr).not.toMatch(/EEXIST|ENOENT|storage_error/)
    }
    expect(existsSync(nowhere)).toBe(false)
  })

  test('a backups folder on a read-only file system is 409 backup_folder_unusable saying so, not the disk\'s storage_error', async (context) => {
    const host = await startTestHost()
    hosts.push(host)
    const readOnlyMount = mountReadOnly()
    // A mount needs root, which CI runs as; elsewhere the case cannot be set up.
    if (readOnlyMount === null) return context.skip()
    const backups = join(host.dataDir, 'backups')
    try {
      symlinkSync(readOnlyMount, backups)
      const answer = await host.call('/api/storage/backup', { method: 'POST' })
      const error = await body(answer)
      expect(answer.status, JSON.stringify(error)).toBe(409)
      expect(error).toEqual({ code: 'backup_folder_unusable', detail: `The backup was not taken: ${backups} is on a read-only file system: make it writable, or make it a link to a folder that is (nothing was written)` })
      const printed = await runCliAsync(['backup', '--url', host.url, '--token', host.token])
      expect(printed.status).toBe(1)
      expect(printed.stderr).toContain(`${backups} is on a read-only file system`)
      expect(printed.stderr).not.toMatch(/EROFS|storage_error/)
    } finally {
      execFileSync('umount', [readOnlyMount])
      rmSync(readOnlyMount, { recursive: true })
    }
  })

  test('leasehold backup prints where the backup is; restored with the host stopped, it is the database the next start opens, as a file closed cleanly', async () => {
    const host = await startTestHost()
    hosts.push(host)
    const kept = (await submit(host)).job_id
    const made = await runCliAsync(['backup', '--url', host.url, '--token', host.token])
    expect(made.status).toBe(0)
    const path = /^(\S+\.db) \(\d+\.\d MB, copied in \d+\.\d s\)$/.exec(made.stdout.trim())?.[1]
    expect(path).toBeDefined()
    const later = (await submit(host)).job_id
    await host.stop()
    copyFileSync(path!, join(host.dataDir, 'leasehold.db'))
    const restored = await startTestHost({ dataDir: host.dataDir })
    hosts.push(restored)
    // A backup is a file no host had open: its start is a clean one (no check of the whole file, no warning).
    expect(restored.integrityCheck).toBeNull()
    const { jobs } = await body(await restored.call(`${QUEUE}/jobs?limit=10`))
    expect(jobs.map((job: { job_id: string }) => job.job_id)).toEqual([kept])
    expect(later).not.toBe(kept)
    expect((await runCliAsync(['backup', 'somewhere', '--url', host.url, '--token', host.token])).status).toBe(2)
  })

  test('a start on a restored backup gives no event id or stream message id its host gave after the copy: both go on past them, and the start says so', async () => {
    const host = await startTestHost()
    hosts.push(host)
    await submit(host)
    const { path } = await body(await host.call('/api/storage/backup', { method: 'POST' }))
    // After the copy the host goes on giving ids, which readers and Redis may hold: more than a
    // block of them (a restart alone goes past the block reserved when the copy was taken).
    for (let i = 0; i < 5; i++) await host.engine.run(() => host.engine.submitMany(Array.from({ length: 1000 }, () => ({ job_type: 'after-copy', cost_units: 1 }))))
    const last = host.engine.getJob((await submit(host)).job_id)
    const after = { event: host.engine.newestEventId(), message: last.stream_message_id! }
    await host.stop()
    copyFileSync(path, join(host.dataDir, 'leasehold.db'))
    const lines: string[] = []
    const restored = await startTestHost({ dataDir: host.dataDir }, { log: (line) => lines.push(line) })
    hosts.push(restored)
    const job = restored.engine.getJob((await submit(restored)).job_id)
    expect(restored.engine.jobEvents(job.id)[0]!.id).toBeGreaterThan(after.event)
    expect(job.stream_message_id).toBeGreaterThan(after.message)
    expect(lines).toContainEqual(expect.stringMatching(/^leasehold: the database is a backup taken \S+Z: event ids go on from \d+ and stream message ids from \d+, past any its host gave after the copy$/))
    // Once: the next start is a start like any other.
    await restored.stop()
    const again: string[] = []
    hosts.push(await startTestHost({ dataDir: host.dataDir }, { log: (line) => again.push(line) }))
    expect(again.filter((line) => line.includes('is a backup taken'))).toEqual([])
  })
})

/** A fresh read-only tmpfs mount, or null where this user may not mount one. */
function mountReadOnly(): string | null {
  const at = mkdtempSync(join(tmpdir(), 'leasehold-ro-'))
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'ro,size=1m', 'tmpfs', at], { stdio: 'ignore' })
    return at
  } catch {
    rmSync(at, { recursive: true, force: true })
    return null
  }
}
