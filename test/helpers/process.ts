import { type ChildProcess, spawn, spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'

export const BIN = fileURLToPath(new URL('../../bin/leasehold.js', import.meta.url))

/** Runs `leasehold …` to completion. */
export function runCli(args: string[], env: NodeJS.ProcessEnv = {}): { status: number | null; stdout: string; stderr: string } {
  const result = spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', env: { ...process.env, ...env }, timeout: 30_000 })
  return { status: result.status, stdout: result.stdout, stderr: result.stderr }
}

/**
 * Runs `leasehold …` to completion without blocking this process (runCli's spawnSync would stall
 * a host running in this process, which the command talks to). `started` hears of the child, so
 * a test can kill one left running; `input`, if given, is its stdin.
 */
export function runCliAsync(
  args: string[],
  env: NodeJS.ProcessEnv = {},
  started: (child: ChildProcess) => void = () => {},
  input?: string,
): Promise<{ status: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [BIN, ...args], { env: { ...process.env, ...env }, stdio: [input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'] })
  started(child)
  if (input !== undefined) child.stdin!.end(input)
  let stdout = ''
  let stderr = ''
  child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()))
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
  return new Promise((resolve) => child.once('close', (status) => resolve({ status, stdout, stderr })))
}

/** A `leasehold …` command still running, for a test to act on while it runs. */
export interface RunningCli {
  child: ChildProcess
  /** Its exit status, once it has exited and its output has all been read. */
  exited: Promise<number | null>
  /** Resolves once `ready()` holds (checked every 25 ms); throws with the output so far after `ms`. */
  until(what: string, ready: () => boolean, ms?: number): Promise<void>
  stdout(): string
  stderr(): string
}

/** Starts `leasehold …` and lets the test act while it runs (runCliAsync waits for its end). */
export function startCli(args: string[], env: NodeJS.ProcessEnv = {}): RunningCli {
  const child = spawn(process.execPath, [BIN, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()))
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
  const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)))
  const until = async (what: string, ready: () => boolean, ms = 20_000) => {
    const deadline = Date.now() + ms
    while (!ready()) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}\nstdout: ${stdout}\nstderr: ${stderr}`)
      await new Promise((resolve) => setTimeout(resolve, 25))
    }
  }
  return { child, exited, until, stdout: () => stdout, stderr: () => stderr }
}

export interface ServeProcess {
  child: ChildProcess
  url: string
  exited: Promise<number | null>
  stdout(): string
  stderr(): string
}

/**
 * Starts `leasehold serve …` and resolves once it printed its listening line. No local workers
 * unless the args ask for them (they would take the test's jobs). `launcher` runs Node under
 * another program (`fiu-run -x`).
 */
export function startServe(args: string[], env: NodeJS.ProcessEnv = {}, launcher: string[] = []): Promise<ServeProcess> {
  const withWorkers = args.includes('--workers') ? args : [...args, '--workers', '0']
  const [command, ...before] = [...launcher, process.execPath]
  const child = spawn(command!, [...before, BIN, 'serve', ...withWorkers], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`serve did not start: ${stderr}`)), 20_000)
    child.stdout!.on('data', (chunk: Buffer) => {
      stdout += chunk.toString()
      const match = /leasehold listening on (http:\/\/\S+)/.exec(stdout)
      if (match) {
        clearTimeout(timer)
        resolve({ child, url: match[1]!, exited, stdout: () => stdout, stderr: () => stderr })
      }
    })
    exited.then((code) => {
      clearTimeout(timer)
      reject(new Error(`serve exited with ${code}: ${stderr}`))
    })
  })
}
