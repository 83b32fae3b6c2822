import { spawn } from 'node:child_process'
import { basename } from 'node:path'
import { type Handler, JobError } from '../handler-api'
import { lineReader } from '../../src-shared/line-reader'
import { endGroup, type ProcessGroup, processStarted } from '../../src-shared/process-groups'
import { announceGroup } from '../exec-groups'

const TAIL_LINES = 50
/**
 * How long the output of a program that has exited is read on: what it wrote before it exited.
 * A process it left behind may hold its output open for as long as it runs; the job does not wait for it.
 */
const OUTPUT_AFTER_EXIT_MS = 100

interface ExecPayload {
  program: string
  args: string[]
  cwd?: string
  env?: Record<string, string>
  timeout_ms?: number
}

function parsePayload(payload: unknown): ExecPayload {
  const p = (payload ?? {}) as Record<string, unknown>
  const args = p.args ?? []
  const ok =
    typeof p.program === 'string' &&
    p.program.length > 0 &&
    Array.isArray(args) &&
    args.every((a) => typeof a === 'string') &&
    (p.cwd === undefined || typeof p.cwd === 'string') &&
    (p.env === undefined || (typeof p.env === 'object' && p.env !== null && Object.values(p.env).every((v) => typeof v === 'string'))) &&
    (p.timeout_ms === undefined || (typeof p.timeout_ms === 'number' && p.timeout_ms > 0))
  if (!ok) {
    throw new JobError('exec: payload must be {program, args?: string[], cwd?, env?: {NAME: value}, timeout_ms?}', {
      code: 'invalid_payload',
      retryable: false,
    })
  }
  return p as unknown as ExecPayload
}

/** Whether `program` is on the allow-list: by the exact path given, or by its bare name. */
export function execAllowed(program: string, allowList: readonly string[]): boolean {
  return allowList.includes(program) || (!program.includes('/') && allowList.some((entry) => basename(entry) === program && !entry.includes('/')))
}

/**
 * `exec {program, args, cwd, env, timeout_ms}`: runs a program — never through a shell, so no
 * string is ever interpolated — if it is on the allow-list. Output lines become progress notes;
 * exit 0 succeeds with the output tail as the result, anything else fails.
 *
 * The program leads a process group of its own (`detached`), and a stop — its timeout, the job's
 * signal — ends the whole group (process-groups.ts), what the program started with it. The job
 * ends when the program has exited, not when the last process holding its output has.
 */
export function execHandler(allowList: readonly string[], setBy?: string): Handler {
  return {
    type: 'exec',
    run({ payload, signal, progress, log }) {
      const p = parsePayload(payload)
      if (!execAllowed(p.program, allowList)) {
        throw new JobError(`exec: "${p.program}" is not on the allow-list${setBy ? ` (${setBy})` : ''}`, {
          code: 'exec_not_allowed',
          retryable: false,
        })
      }
      return new Promise((resolve, reject) => {
        const child = spawn(p.program, p.args, {
          cwd: p.cwd,
          env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...p.env },
          shell: false,
          detached: true,
          stdio: ['ignore', 'pipe', 'pipe'],
        })
        // Read before the child can be reaped (not before this turn ends): the pid is surely its.
        const group: ProcessGroup | null = child.pid ? { pgid: child.pid, started: processStarted(child.pid) } : null
        if (group?.started) announceGroup({ type: 'exec_started', pgid: group.pgid, started: group.started })
        /** Until its exit is seen the child is not reaped, so its pid — its group's id — is not anyone else's. */
        let exited = false
        const tail: string[] = []
        const onLine = (line: string) => {
          tail.push(line)
          if (tail.length > TAIL_LINES) tail.shift()
          progress(null, line.slice(0, 500))
          log(line)
        }
        const reads = [child.stdout, child.stderr].map((stream) => {
          const read = lineReader(onLine)
          stream.setEncoding('utf8')
          stream.on('data', (chunk: string) => read.push(chunk))
          return new Promise<void>((done) => stream.once('close', () => (read.end(), done())))
        })
        let stopping = false
        const stop = () => {
          if (stopping || !group) return
          stopping = true
          void endGroup(group, () => !exited)
        }
        let timedOut = false
        const timer = p.timeout_ms ? setTimeout(() => ((timedOut = true), stop()), p.timeout_ms) : null
        signal.addEventListener('abort', stop, { once: true })
        child.on('error', (error) => {
          if (timer) clearTimeout(timer)
          signal.removeEventListener('abort', stop)
          reject(new JobError(`exec: cannot run "${p.program}": ${error.message}`, { code: 'exec_failed', retryable: false }))
        })
        child.on('exit', (code, sig) => {
          exited = true
          if (group?.started) announceGroup({ type: 'exec_ended', pgid: group.pgid })
          if (timer) clearTimeout(timer)
          signal.removeEventListener('abort', stop)
          const outputRead = new Promise<void>((done) => setTimeout(done, OUTPUT_AFTER_EXIT_MS).unref())
          void Promise.race([Promise.all(reads), outputRead]).then(() => {
            child.stdout.destroy()
            child.stderr.destroy()
            const output_tail = tail.join('\n')
            if (code === 0) resolve({ exit_code: 0, output_tail })
            else if (timedOut) reject(new JobError(`exec: timed out after ${p.timeout_ms} ms`, { code: 'exec_timeout' }))
            else reject(Object.assign(new JobError(`exec: exited with ${code ?? sig}`, { code: 'exit_status' }), { output_tail }))
          })
        })
      })
    },
  }
}
