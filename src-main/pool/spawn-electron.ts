import { utilityProcess } from 'electron'
import { type Spawner, workerEntry } from './spawn'

/**
 * In the desktop app: local workers are Electron utility processes running the same worker entry
 * (built to out/main/worker.js). They talk to the host over their parentPort, which the worker's
 * IPC transport uses when it finds one.
 */
export const utilitySpawner: Spawner = (env) => {
  const child = utilityProcess.fork(workerEntry(), [], {
    env: { ...process.env, ...env },
    stdio: 'pipe',
    serviceName: 'Leasehold worker',
  })
  const outputListeners: ((line: string) => void)[] = []
  for (const stream of [child.stdout, child.stderr]) {
    let partial = ''
    stream?.on('data', (chunk: Buffer) => {
      const lines = (partial + chunk.toString('utf8')).split('\n')
      partial = lines.pop() ?? ''
      for (const line of lines) if (line) outputListeners.forEach((l) => l(line))
    })
  }
  return {
    get pid() {
      return child.pid ?? null
    },
    send: (message) => child.postMessage(message),
    onMessage: (listener) => child.on('message', listener),
    onExit: (listener) => child.once('exit', (code) => listener(code)),
    kill: () => void child.kill(),
    onOutput: (listener) => outputListeners.push(listener),
  }
}
