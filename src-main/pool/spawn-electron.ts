import type { UtilityProcess, utilityProcess } from 'electron'
import { lineReader } from '../../src-shared/line-reader'
import { type Spawner, workerEntry } from './spawn'

/** Electron's `utilityProcess.fork`, handed in by electron.ts so this module runs (and is tested) without Electron. */
export type UtilityFork = (typeof utilityProcess)['fork']

/**
 * In the desktop app: local workers are Electron utility processes running the same worker entry
 * (built to out/main/worker.js). They talk to the host over their parentPort, which the worker's
 * IPC transport uses when it finds one.
 */
export function utilitySpawner(fork: UtilityFork, entry: () => string = workerEntry): Spawner {
  return (env) => {
    const child: UtilityProcess = fork(entry(), [], {
      env: { ...process.env, ...env },
      stdio: 'pipe',
      serviceName: 'Leasehold worker',
    })
    // A utility process has no pid until it has started: `fork` returns at once and the process
    // is launched afterwards. The pid is taken from the 'spawn' event, not read at fork time.
    let pid: number | null = null
    child.once('spawn', () => {
      pid = child.pid ?? null
    })
    child.once('exit', () => {
      pid = null
    })
    const outputListeners: ((line: string) => void)[] = []
    for (const stream of [child.stdout, child.stderr]) {
      const read = lineReader((line) => line && outputListeners.forEach((l) => l(line)))
      stream?.on('data', (chunk: Buffer) => read.push(chunk.toString('utf8')))
    }
    return {
      get pid() {
        return pid
      },
      send: (message) => child.postMessage(message),
      onMessage: (listener) => child.on('message', listener),
      onExit: (listener) => child.once('exit', (code) => listener(code)),
      kill: () => void child.kill(),
      onOutput: (listener) => outputListeners.push(listener),
    }
  }
}
