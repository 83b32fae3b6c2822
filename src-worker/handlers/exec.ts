import { spawn } from 'node:child_process'
import { accessSync, constants, statSync } from 'node:fs'
import { delimiter, isAbsolute, join } from 'node:path'
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

/** A string a program can be given: no NUL, which ends a C string (Node refuses it at spawn, too late to say whose fault). */
const isCString = (value: unknown): value is string => typeof value === 'string' && !value.includes('\0')

/** An environment variable's name as `env` takes it: not empty, no `=` and no NUL. */
const ENV_NAME = /^[^=\0]+$/

/**
 * The variables a payload's `env` may not set: each changes which code the program, its dynamic
 * loader, its shell or its interpreter runs — a library to preload, a file a shell sources, a
 * module path, options that load code, a config folder with hooks in it, a pager or editor to
 * start. Through any of them an allowed program would run code nobody allowed. Names are
 * compared in capitals (npm reads its settings in any case). The PATH the program gets is the
 * worker's own.
 */
const CODE_CHOOSING_NAMES = new Set([
  'PATH', 'IFS', 'ENV', 'BASH_ENV', 'SHELLOPTS', 'BASHOPTS', 'PS4', 'PROMPT_COMMAND', 'GLOBIGNORE', 'CDPATH', 'ZDOTDIR',
  'HOME', 'EDITOR', 'VISUAL', 'PAGER', 'MANPAGER', 'BROWSER', 'LESSOPEN', 'LESSCLOSE', 'SSH_ASKPASS', 'SUDO_ASKPASS',
  'CLASSPATH', 'GCONV_PATH', 'GLIBC_TUNABLES', 'LOCPATH', 'NLSPATH', 'HOSTALIASES', 'OPENSSL_CONF', 'OPENSSL_ENGINES',
  'GTK_MODULES', 'QT_PLUGIN_PATH', 'GIO_MODULE_DIR', 'GST_PLUGIN_PATH', 'TCLLIBPATH',
])
const CODE_CHOOSING_PREFIXES = ['LD_', 'DYLD_', 'BASH_FUNC_', 'PYTHON', 'PERL', 'RUBY', 'NODE_', 'NPM_CONFIG_', 'GIT_', 'JAVA_', '_JAVA_', 'JDK_JAVA_', 'LUA_', 'XDG_']

/** Whether a payload's `env` may set `name` (see {@link CODE_CHOOSING_NAMES}). */
export function envNameAllowed(name: string): boolean {
  const upper = name.toUpperCase()
  return !CODE_CHOOSING_NAMES.has(upper) && !CODE_CHOOSING_PREFIXES.some((prefix) => upper.startsWith(prefix))
}

const invalidPayload = (message: string) => new JobError(`exec: ${message}`, { code: 'invalid_payload', retryable: false })

function parsePayload(payload: unknown): ExecPayload {
  const p = (payload ?? {}) as Record<string, unknown>
  const args = p.args ?? []
  const ok =
    isCString(p.program) &&
    p.program.length > 0 &&
    Array.isArray(args) &&
    args.every(isCString) &&
    (p.cwd === undefined || (isCString(p.cwd) && p.cwd.length > 0)) &&
    (p.env === undefined || (typeof p.env === 'object' && p.env !== null && !Array.isArray(p.env) && Object.entries(p.env).every(([name, value]) => ENV_NAME.test(name) && isCString(value)))) &&
    (p.timeout_ms === undefined || (typeof p.timeout_ms === 'number' && p.timeout_ms > 0))
  if (!ok) throw invalidPayload('payload must be {program, args?: string[], cwd?, env?: {NAME: value}, timeout_ms?}, its strings without NUL')
  const refused = Object.keys((p.env ?? {}) as object).filter((name) => !envNameAllowed(name))
  if (refused.length > 0) {
    throw invalidPayload(`env may not set ${refused.map((name) => JSON.stringify(name)).join(', ')}: a variable that chooses which code runs (a loader, shell or interpreter hook, PATH, HOME) would run code off the allow-list`)
  }
  return { ...(p as unknown as ExecPayload), args: args as string[] }
}

/** The PATH a worker without one looks programs up in, and gives the programs it runs. */
const DEFAULT_PATH = '/usr/bin:/bin'

/**
 * Where `searchPath` (the worker's own PATH) finds `name`: the first executable file of that
 * name in one of its absolute folders. A relative folder is skipped: it would be looked up from
 * wherever the lookup runs, not a place the operator named.
 */
export function lookUp(name: string, searchPath: string = process.env.PATH ?? DEFAULT_PATH): string | null {
  for (const folder of searchPath.split(delimiter)) {
    if (!isAbsolute(folder)) continue
    const file = join(folder, name)
    try {
      if (!statSync(file).isFile()) continue
      accessSync(file, constants.X_OK)
      return file
    } catch {
      continue
    }
  }
  return null
}

/**
 * What a job's `program` runs, resolved by the worker and never by the job: the absolute path
 * it names, or the file a bare name is found at in the worker's own PATH (`file` null when it is
 * found nowhere). `null` when the allow-list does not allow it: an absolute path is allowed when
 * the list names it, or names a bare name the worker finds there; a bare name only when the list
 * has that bare name; a relative path never (the job's `cwd` would choose the file).
 */
export function allowedProgram(program: string, allowList: readonly string[], find: (name: string) => string | null = lookUp): { file: string | null } | null {
  if (!program.includes('/')) return allowList.includes(program) ? { file: find(program) } : null
  if (!isAbsolute(program)) return null
  const listed = allowList.includes(program) || allowList.some((entry) => !entry.includes('/') && find(entry) === program)
  return listed ? { file: program } : null
}

/** Why a job's `cwd` cannot be run in, or null when it is a folder. */
function cwdProblem(cwd: string): string | null {
  try {
    return statSync(cwd).isDirectory() ? null : `cwd "${cwd}" is not a folder`
  } catch {
    return `cwd "${cwd}" does not exist on this worker`
  }
}

/**
 * `exec {program, args, cwd, env, timeout_ms}`: runs a program — never through a shell, so no
 * string is ever interpolated — if it is on the allow-list, as the worker resolves it
 * ({@link allowedProgram}), with an `env` that sets no variable choosing which code runs
 * ({@link envNameAllowed}): the job names a program, the operator's list decides the file. Output lines become progress notes;
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
      const allowed = allowedProgram(p.program, allowList)
      if (!allowed) {
        throw new JobError(`exec: "${p.program}" is not on the allow-list${setBy ? ` (${setBy})` : ''}`, {
          code: 'exec_not_allowed',
          retryable: false,
        })
      }
      const file = allowed.file
      if (file === null) throw new JobError(`exec: cannot run "${p.program}": not found in the worker's PATH`, { code: 'exec_failed', retryable: false })
      const folder = p.cwd === undefined ? null : cwdProblem(p.cwd)
      if (folder) throw new JobError(`exec: cannot run "${p.program}": ${folder}`, { code: 'exec_failed', retryable: false })
      return new Promise((resolve, reject) => {
        // The file the worker resolved is what runs; the program still sees the name it was asked by.
        const child = spawn(file, p.args, {
          argv0: p.program,
          cwd: p.cwd,
          env: { ...p.env, PATH: process.env.PATH ?? DEFAULT_PATH },
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
