/**
 * A handler thread yields the CPU with lowerPriority (src-worker/niceness.ts): the thread that
 * calls it lowers its own niceness to the one asked, never raises it, leaves the process's other
 * threads as they are, and the programs it starts take it. Run in a child process, as niceness
 * cannot be taken back. Linux only: there niceness is each thread's, which is what the rule is
 * about.
 */
import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { expect, test } from 'vitest'

const NICENESS = fileURLToPath(new URL('../../src-worker/niceness.ts', import.meta.url))

const SCRIPT = `
import { execFileSync } from 'node:child_process'
import { getPriority, setPriority } from 'node:os'
import { Worker } from 'node:worker_threads'
import { lowerPriority } from ${JSON.stringify(NICENESS)}
const start = getPriority()
const other = new Worker(new URL('data:text/javascript,' + encodeURIComponent("import { getPriority } from 'node:os'; import { parentPort } from 'node:worker_threads'; parentPort.once('message', () => parentPort.postMessage(getPriority()))")))
await new Promise((resolve) => other.once('online', resolve))
const program = () => Number(execFileSync(process.execPath, ['-e', "console.log(require('node:os').getPriority())"], { encoding: 'utf8' }))
const failure = lowerPriority(10)
const lowered = { thread: getPriority(), program: program() }
other.postMessage('?')
const otherThread = await new Promise((resolve) => other.once('message', resolve))
setPriority(15) // as under a host started with nice -n 15
lowerPriority(10)
const alreadyNicer = { thread: getPriority(), program: program() }
console.log(JSON.stringify({ start, failure, lowered, otherThread, alreadyNicer }))
process.exit(0)
`

test.runIf(process.platform === 'linux')('a thread lowers itself to the niceness asked, never raises it, leaves the other threads, and the programs it starts take it', () => {
  const run = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', SCRIPT], { encoding: 'utf8', timeout: 30_000 })
  expect(run.stderr).toBe('')
  const { start, ...seen } = JSON.parse(run.stdout) as { start: number }
  expect(start).toBeLessThan(10) // the test itself does not run niced
  expect(seen).toEqual({
    failure: null,
    lowered: { thread: 10, program: 10 },
    otherThread: start,
    alreadyNicer: { thread: 15, program: 15 },
  })
})
