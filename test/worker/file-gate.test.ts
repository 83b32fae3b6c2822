/**
 * Two jobs on real local workers write the same file through `files.*` (the file-lease gate):
 * the second is denied while the first holds the file, waits for its one retry at +180 s on the
 * host's clock (its job keeps its lease meanwhile), then gets the file and writes after the
 * first.
 *
 * The 180 s are the host's injected clock: a ManualClock that follows real time (the reaper,
 * the lease TTLs and the retry waiters all read it), jumped by 180 s once the holder is done.
 */
import { chmodSync, existsSync, lchownSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, expect, test } from 'vitest'
import { ManualClock } from '../../src-main/engine/rules/clock'
import { attempts, cleanUp, dataDirWith, events, HOLD_WRITE, poolReady, settled, startHost, submit, until, waitForEvent } from './support'

const RETRY_MS = 180_000

let ticker: NodeJS.Timeout | undefined
afterEach(async () => {
  clearInterval(ticker)
  await cleanUp()
})

test('two jobs writing one file: the second waits for the first (one retry at +180 s on the host clock), then writes after it', async () => {
  let offset = 0
  const clock = new ManualClock(Date.now())
  ticker = setInterval(() => clock.set(Date.now() + offset), 50)
  // Leases long enough to outlive the 180 s jump: only the file gate is under test here.
  const host = await startHost({ dataDir: dataDirWith({ 'hold-write.mjs': HOLD_WRITE }), workers: 2, leaseTtlS: 600, heartbeatGraceS: 5 }, { clock })
  await poolReady(host, 2)
  const file = join(host.dataDir, 'shared.txt')

  const first = await submit(host, { job_type: 'test.hold-write', payload: { path: file, first: 'first: start\n', second: 'first: end\n', hold_ms: 1000 } })
  await waitForEvent(host, { job: first, type: 'FILE_LEASE_ACQUIRED' }, 5000)
  const second = await submit(host, { job_type: 'file.write', payload: { path: file, content: 'second\n', mode: 'append' } })

  // Denied while the first holds it: the contention names the holder and the one retry.
  const contended = await waitForEvent(host, { job: second, type: 'FILE_LEASE_CONTENDED' }, 5000)
  expect(contended.data).toMatchObject({ file, requester_owner_id: `job:${second}`, holder: { job_id: first, owner_id: `job:${first}` } })
  expect(contended.data.retry_at - contended.data.denied_at).toBe(RETRY_MS)
  expect(attempts(host, second)).toHaveLength(1)
  // Its job runs, and its reads say why it waits and until when.
  expect((await settled(host, second, 100, ['RUNNING'])).job).toMatchObject({
    waiting_reason: `refused file ${file}, held by job …${first.slice(-8)}; waits to try it again`,
    waiting_until: new Date(contended.data.retry_at).toISOString(),
  })
  // The worker's own line comes through its stderr, a moment after the host's event.
  await until(() => host.lines.some((l) => l.includes(`${file} is held; ${second} waits for its one retry`)), 5000, 'the worker says it waits')

  // The holder finishes and lets go of the file; the waiter still waits for its retry time.
  expect((await settled(host, first, 5000)).job.state).toBe('DONE')
  const firstDone = events(host, { job: first, type: 'JOB_DONE' })[0]!
  // A bounded wait, kept on purpose: an early retry would be the worker's own move, and nothing
  // the host or the worker does is bound to come after it, so only time can show it did not come.
  await new Promise((r) => setTimeout(r, 600))
  expect(events(host, { job: second, type: 'FILE_LEASE_ACQUIRED' })).toHaveLength(0)
  expect(readFileSync(file, 'utf8')).toBe('first: start\nfirst: end\n')
  expect((await settled(host, second, 100, ['RUNNING'])).job.state).toBe('RUNNING')

  // 180 s later on the host's clock: the one retry finds the file free.
  offset += RETRY_MS
  const { job, result } = await settled(host, second, 5000)
  expect(job.state).toBe('DONE')
  expect(result).toMatchObject({ status: 'SUCCEEDED', attempts: 1, result_data: { path: file, mode: 'append' } })
  const acquired = await waitForEvent(host, { job: second, type: 'FILE_LEASE_ACQUIRED' }, 100)
  expect(acquired.id).toBeGreaterThan(firstDone.id)
  expect(acquired.ts).toBeGreaterThanOrEqual(contended.data.retry_at)
  expect(readFileSync(file, 'utf8')).toBe('first: start\nfirst: end\nsecond\n')
  expect(events(host, { type: ['BLOCKER_OPENED', 'LEASE_EXPIRED'] })).toHaveLength(0)
  for (const id of [first, second]) expect(events(host, { job: id, type: 'JOB_DONE' })).toHaveLength(1)
})

/** `test.rm-dir`: removes a folder and all it holds, through the gate. */
const RM_DIR = `
export default {
  type: 'test.rm-dir',
  async run({ payload, files }) {
    await files.rm(payload.path, { recursive: true })
    return { removed: payload.path }
  },
}
`

test("a recursive rm of a folder waits while another job holds a file inside it: the folder's lease covers the file", async () => {
  let offset = 0
  const clock = new ManualClock(Date.now())
  ticker = setInterval(() => clock.set(Date.now() + offset), 50)
  const host = await startHost({ dataDir: dataDirWith({ 'hold-write.mjs': HOLD_WRITE, 'rm-dir.mjs': RM_DIR }), workers: 2, leaseTtlS: 600, heartbeatGraceS: 5 }, { clock })
  await poolReady(host, 2)
  const dir = join(host.dataDir, 'd')
  mkdirSync(dir)
  const file = join(dir, 'f.txt')

  const holder = await submit(host, { job_type: 'test.hold-write', payload: { path: file, first: 'start\n', second: 'end\n', hold_ms: 1000 } })
  await waitForEvent(host, { job: holder, type: 'FILE_LEASE_ACQUIRED' }, 5000)
  // Its first write, which makes the file, follows the lease's grant.
  await until(() => existsSync(file), 5000, 'the holder wrote the file')
  const remover = await submit(host, { job_type: 'test.rm-dir', payload: { path: dir } })
  const contended = await waitForEvent(host, { job: remover, type: 'FILE_LEASE_CONTENDED' }, 5000)
  expect(contended.data).toMatchObject({ file: dir, holder: { file, job_id: holder } })
  expect(existsSync(file)).toBe(true)

  // The holder finishes; at its one retry the remover takes the folder and removes it.
  expect((await settled(host, holder, 5000)).job.state).toBe('DONE')
  expect(readFileSync(file, 'utf8')).toBe('start\nend\n')
  offset += RETRY_MS
  expect((await settled(host, remover, 5000)).job.state).toBe('DONE')
  expect(existsSync(dir)).toBe(false)
})

test('a write to a path the gate refuses as such fails its job at the first attempt, not dead-lettered after three: too long to key, or through a folder not valid UTF-8', async () => {
  const host = await startHost({ workers: 1 })
  await poolReady(host, 1)
  const long = `${host.dataDir}/${'a/'.repeat(2500)}x.txt`
  const folder = Buffer.concat([Buffer.from(`${host.dataDir}/nu`), Buffer.from([0xff])])
  mkdirSync(folder)
  symlinkSync(folder, join(host.dataDir, 'nulink'))
  for (const [path, code] of [[long, 'ENAMETOOLONG'], [join(host.dataDir, 'nulink', 'x.txt'), 'EILSEQ']] as const) {
    const id = await submit(host, { job_type: 'file.write', payload: { path, content: 'z' }, max_attempts: 3 })
    const { job, result } = await settled(host, id, 10_000)
    expect(job.state).toBe('FAILED')
    expect(result).toMatchObject({ attempts: 1 })
    const [attempt] = attempts(host, id)
    expect(attempt!.error).toMatchObject({ code, retryable: false })
  }
  expect(events(host, { type: 'FILE_LEASE_ACQUIRED' })).toHaveLength(0)
})

test("a file.write through another user's symlink in a shared folder (sticky, writable by anyone) fails its job at the first attempt, EACCES, the file it names untouched, whatever fs.protected_symlinks says", async (context) => {
  // A link another user owns is made by giving it away (lchown), which only root may do.
  if (process.getuid?.() !== 0) return context.skip('it needs root to give a symlink to another user (lchown)')
  const host = await startHost({ workers: 1 })
  await poolReady(host, 1)
  const shared = join(host.dataDir, 'shared')
  mkdirSync(shared)
  chmodSync(shared, 0o1777)
  const victim = join(host.dataDir, 'victim.txt')
  writeFileSync(victim, 'ORIGINAL', { mode: 0o600 })
  const link = join(shared, 'report.txt')
  symlinkSync(victim, link)
  lchownSync(link, 65534, 65534)
  for (const mode of ['write', 'append']) {
    const id = await submit(host, { job_type: 'file.write', payload: { path: link, content: 'job content', mode }, max_attempts: 3 })
    const { job, result } = await settled(host, id, 10_000)
    expect(job.state).toBe('FAILED')
    expect(result).toMatchObject({ attempts: 1 })
    const [attempt] = attempts(host, id)
    expect(attempt!.error).toMatchObject({ code: 'EACCES', retryable: false, message: expect.stringContaining(`${link} is a symbolic link another user owns (uid 65534) in a shared folder`) })
  }
  expect(readFileSync(victim, 'utf8')).toBe('ORIGINAL')
  expect(events(host, { type: 'FILE_LEASE_ACQUIRED' })).toHaveLength(0)
})
