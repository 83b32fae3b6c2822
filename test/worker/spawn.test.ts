/**
 * How the host starts a local worker process under plain Node: from the sources, through tsx,
 * whatever the host's working directory.
 */
import { fork } from 'node:child_process'
import { expect, test } from 'vitest'
import { forkSpawner, workerEntry, workerExecArgv } from '../../src-main/pool/spawn'
import { tempDir } from '../helpers/host'

test('a local worker started from the sources starts whatever directory the host runs in (tsx is found by its path, not from there)', async () => {
  const home = process.cwd()
  process.chdir(tempDir('leasehold-elsewhere-')) // no node_modules here, or above
  let worker: ReturnType<typeof forkSpawner> | undefined
  try {
    worker = forkSpawner({ LEASEHOLD_WORKER_ID: 'elsewhere' })
    const output: string[] = []
    worker.onOutput((line) => output.push(line))
    const first = await new Promise<unknown>((resolve) => {
      worker!.onMessage(resolve)
      worker!.onExit((code) => resolve({ exited: code, output }))
    })
    expect(first).toMatchObject({ type: 'ready', worker_id: 'elsewhere' })
  } finally {
    process.chdir(home)
    worker?.kill()
  }
})

test('a local worker whose host went while it was starting (the channel closed before it listened) exits, not running on as an orphan', async () => {
  const child = fork(workerEntry(), [], {
    execArgv: workerExecArgv(),
    env: { ...process.env, LEASEHOLD_WORKER_ID: 'orphan' },
    stdio: ['ignore', 'ignore', 'ignore', 'ipc'],
  })
  try {
    child.disconnect() // before the worker's code has loaded: as a pool stopped at once
    const exit = await new Promise<number | null | 'running'>((resolve) => {
      child.once('exit', (code) => resolve(code))
      setTimeout(() => resolve('running'), 15_000).unref()
    })
    expect(exit).toBe(1)
  } finally {
    child.kill('SIGKILL')
  }
})
