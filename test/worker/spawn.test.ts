/**
 * How the host starts a local worker process under plain Node: from the sources, through tsx,
 * whatever the host's working directory.
 */
import { expect, test } from 'vitest'
import { forkSpawner } from '../../src-main/pool/spawn'
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
