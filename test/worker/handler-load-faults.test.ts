/**
 * A handler file that cannot be taken stops nothing else: on the host's pool and on `leasehold
 * worker`, it is reported as a handler that did not load, naming the file, and the other handlers
 * and the built-ins run.
 */
import { chmodSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, test } from 'vitest'
import { HANDLER_LOAD_TIMEOUT_MS } from '../../src-shared/limits'
import { cleanUp, dataDirWith, poolReady, settled, spawnWorker, startHost, submit, workerStarted } from './support'

afterEach(() => cleanUp())

const FINE = { 'fine.mjs': "export const type = 'test.fine'; export function run() { return 'fine' }" }

/** Each kind of handler file that does not load: the files, and what the log says of each. */
const CASES = [
  {
    what: 'a job type the host refuses',
    handlers: {
      ...FINE,
      'x.mjs': "export const type = 'x'.repeat(300); export function run() { return 1 }",
      'nul.mjs': "export const type = 'bad\\u0000type'; export function run() { return 1 }",
    },
    reported: [
      /handler \S*x\.mjs did not load: its job type "x{40}"… \(300 characters\) is not one the host takes: Too big: expected string to have <=200 characters/,
      /handler \S*nul\.mjs did not load: its job type "bad\\u0000type" is not one the host takes/,
    ],
    never: 'refuses this worker',
  },
  {
    what: `a top-level await that never settles (reported once ${HANDLER_LOAD_TIMEOUT_MS / 1000} s have passed)`,
    handlers: { ...FINE, 'tla.mjs': "await new Promise(() => {}); export const type = 'test.tla'; export function run() { return 1 }" },
    reported: [/handler \S*tla\.mjs did not load: did not finish loading within 5 s/],
    never: 'exited with 13',
  },
  {
    what: 'a mode that lets others write it (another user could have changed its code)',
    handlers: { ...FINE, 'loose.mjs': "console.error('the loose module ran'); export const type = 'noop'; export function run() { return 'replaced' }" },
    modes: { 'loose.mjs': 0o646 },
    reported: [/handler \S*loose\.mjs did not load: it is writable by others \(mode 0646\): another user could change its code, which would run as this user; run `chmod go-w \S*loose\.mjs`/],
    never: 'the loose module ran',
  },
]

/** The data dir of a case: its handler files, with the modes it gives some of them. */
function caseDataDir(handlers: Record<string, string>, modes: Record<string, number> = {}): string {
  const dataDir = dataDirWith(handlers)
  for (const [name, mode] of Object.entries(modes)) chmodSync(join(dataDir, 'handlers', name), mode)
  return dataDir
}

describe.each(CASES)('a handler file with $what', ({ handlers, modes, reported, never }) => {
  test('is reported naming its file and skipped: the pool runs the other handlers, noop too', async () => {
    const host = await startHost({ dataDir: caseDataDir(handlers, modes), workers: 1 })
    await poolReady(host, 1)
    for (const type of ['noop', 'test.fine']) expect((await settled(host, await submit(host, { job_type: type }), 10_000)).job.state, type).toBe('DONE')
    const log = host.lines.join('\n')
    for (const line of reported) expect(log).toMatch(line)
    expect(log).not.toContain(never)
  })

  test('is reported naming its file by leasehold worker --handlers, which takes jobs', async () => {
    const dataDir = caseDataDir(handlers, modes)
    const host = await startHost({ dataDir, workers: 0 })
    const worker = spawnWorker(host, ['--handlers', join(dataDir, 'handlers')])
    await workerStarted(worker)
    for (const type of ['noop', 'test.fine']) expect((await settled(host, await submit(host, { job_type: type }), 10_000)).job.state, type).toBe('DONE')
    for (const line of reported) expect(worker.output()).toMatch(line)
    expect(worker.output()).not.toContain(never)
  })
})
