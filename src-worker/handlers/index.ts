import { spawnSync } from 'node:child_process'
import { readdirSync, statSync } from 'node:fs'
import { basename, join, resolve } from 'node:path'
import { inspect } from 'node:util'
import { pathToFileURL } from 'node:url'
import { othersMayWrite } from '../../src-shared/others-may-write'
import { HANDLER_LOAD_TIMEOUT_MS, Name } from '../../src-shared/worker-exchange'
import type { WriteAllow } from '../../src-shared/write-allow'
import type { Handler } from '../handler-api'
import { execHandler } from './exec'
import { fileWriteHandler } from './file-write'
import { noop } from './noop'
import { sleep } from './sleep'

export interface HandlerOptions {
  /** Folder of user handlers (`*.mjs` exporting `{type, run}`), or null for none. */
  handlersDir: string | null
  /** Programs the `exec` handler may run. */
  execAllow: readonly string[]
  /**
   * Where that list is set for this worker, named in the refusal of a program not on it: the
   * host's setting for its local workers, `leasehold worker --exec-allow` for that command's.
   */
  execAllowSetBy?: string
  /** Where the `file.write` handler may write (src-shared/write-allow.ts): null or absent, anywhere the worker's user may. */
  writeAllow?: WriteAllow
  /**
   * Where that list is set for this worker, named in the refusal of a write off it: the host's
   * setting for its local workers, `leasehold worker --write-allow` for that command's.
   */
  writeAllowSetBy?: string
  /**
   * The niceness a handler thread lowers itself to unless it drives (local workers: `leasehold
   * serve --worker-nice`, see handler-thread.ts); absent or 0, threads run as their worker does.
   */
  nice?: number
  /**
   * The largest result or error a handler's attempt may report, in bytes of its JSON (local
   * workers: the host's `--body-limit`; `leasehold worker`: the largest any host takes,
   * MAX_BODY_LIMIT_BYTES, as it does not know its host's). See handler-output.ts.
   */
  maxReportBytes?: number
  /** How long the handler modules may take to load (HANDLER_LOAD_TIMEOUT_MS unless given). */
  loadTimeoutMs?: number
  /** Handler modules (absolute paths) not to load: their uncaught errors ended threads as they loaded (thread-crashes.ts). */
  skip?: readonly string[]
}

export interface LoadedHandlers {
  handlers: Map<string, Handler>
  /** Modules that failed to load: reported and skipped, the rest still load. */
  problems: { file: string; error: string }[]
  /** The handlers folder's file each job type it runs was loaded from (absolute paths; built-in types are not in it). */
  fileOf: Record<string, string>
}

/**
 * The built-in handlers plus every user handler that loads; a user handler may replace a built-in.
 * Two user files of one job type: the later in name order runs, and the earlier is reported as a
 * handler that did not load, naming the other. `exec` is among them only with programs on its
 * allow-list: a worker takes only the job types it runs, and with an empty list every `exec` job
 * it took would fail for good, while another worker that allows the program could run it.
 * `file.write` is always among them: with `--write-allow none` its jobs fail, saying which flag
 * allows them, rather than wait unsaid for a worker that writes.
 * A handlers folder or module another user owns or may write is reported and not imported
 * ({@link sharedHandlersDir}, {@link sharedHandlerFile}).
 */
export async function loadHandlers(options: HandlerOptions): Promise<LoadedHandlers> {
  const handlers = new Map<string, Handler>()
  const writer = fileWriteHandler(options.writeAllow ?? null, options.writeAllowSetBy ?? '--write-allow')
  const builtIn = [sleep, noop, writer, ...(options.execAllow.length > 0 ? [execHandler(options.execAllow, options.execAllowSetBy)] : [])]
  for (const handler of builtIn) handlers.set(handler.type, handler)
  const problems: LoadedHandlers['problems'] = []
  let files: string[] = []
  if (options.handlersDir) {
    try {
      const skip = new Set(options.skip)
      const shared = sharedHandlersDir(options.handlersDir)
      if (shared) problems.push({ file: options.handlersDir, error: shared })
      else {
        files = readdirSync(options.handlersDir)
          .filter((f) => f.endsWith('.mjs') && !skip.has(resolve(options.handlersDir!, f)))
          .sort()
      }
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') problems.push({ file: options.handlersDir, error: (error as Error).message })
    }
  }
  // Looked at before any is imported: importing a module runs its code.
  files = files.filter((file) => {
    const shared = sharedHandlerFile(join(options.handlersDir!, file))
    if (shared) problems.push({ file: join(options.handlersDir!, file), error: shared })
    return !shared
  })
  /** The user file each job type was last loaded from. */
  const fileOf: Record<string, string> = {}
  const paths = files.map((file) => join(options.handlersDir!, file))
  const modules = importAll(paths, options.loadTimeoutMs ?? HANDLER_LOAD_TIMEOUT_MS)
  for (const [index, file] of files.entries()) {
    const path = paths[index]!
    try {
      const handler = handlerIn((await modules[index]) as Record<string, unknown>)
      // A type the host refuses in a claim's job_types would make it refuse every claim of the worker.
      const named = Name.safeParse(handler.type)
      if (!named.success) throw new Error(`its job type ${shownType(handler.type)} is not one the host takes: ${named.error.issues[0]?.message ?? 'invalid'}`)
      const before = fileOf[handler.type]
      if (before !== undefined) problems.push({ file: before, error: `job type ${JSON.stringify(handler.type)} is exported by ${file} too, which loads after it (in name order) and runs it` })
      handlers.set(handler.type, handler)
      fileOf[handler.type] = path
    } catch (error) {
      problems.push({ file: path, error: loadError(path, error) })
    }
  }
  return { handlers, problems, fileOf }
}

/**
 * The handler a module exports, as its default export or as named exports `type` and `run`;
 * throws saying what is wrong with it: neither form, a `type` that is no string, a `run` that is
 * no function. A module exporting both forms, each naming another type or `run`, is refused
 * rather than one of them silently run: which one its author meant cannot be told.
 */
function handlerIn(module: Record<string, unknown>): Handler {
  const asDefault = handlerFields(module.default)
  const asNamed = handlerFields(module)
  if (asDefault && asNamed && (asDefault.type !== asNamed.type || asDefault.run !== asNamed.run)) {
    throw new Error(`exports {type, run} both as its default export (type ${shownValue(asDefault.type)}) and as named exports (type ${shownValue(asNamed.type)}), which differ: export one of them`)
  }
  const fields = asDefault ?? asNamed
  if (!fields) throw new Error('does not export {type, run}')
  const its = asDefault ? "its default export's" : 'its'
  if (typeof fields.type !== 'string') throw new Error(`${its} type is not a string (${shownValue(fields.type)})`)
  if (typeof fields.run !== 'function') throw new Error(`${its} run is not a function (${shownValue(fields.run)})`)
  return fields as Handler
}

/** `value`'s `type` and `run`, when it has either; null when it has neither (no handler in that form). */
function handlerFields(value: unknown): { type?: unknown; run?: unknown } | null {
  if ((typeof value !== 'object' && typeof value !== 'function') || value === null) return null
  const fields = value as { type?: unknown; run?: unknown }
  return 'type' in fields || 'run' in fields ? fields : null
}

/** A value a module exported where a type or a run belongs, as a load problem names it: its kind, and its first 40 characters (`a number: 123`). */
function shownValue(value: unknown): string {
  if (value === undefined) return 'none'
  if (value === null) return 'null'
  const kind = Array.isArray(value) ? 'an array' : typeof value === 'object' ? 'an object' : `a ${typeof value}`
  if (typeof value === 'function') return kind
  const text = typeof value === 'string' ? shownType(value) : inspect(value, { depth: 0, breakLength: Infinity })
  return `${kind}: ${text.length > 40 ? `${text.slice(0, 40)}…` : text}`
}

/**
 * Why the handlers folder is not loaded, when another user owns it or may write in it
 * (src-shared/others-may-write.ts): they could put a module in it, which this worker would run
 * as its own user. Null when it is this user's or root's alone; throws as statSync does (ENOENT).
 */
function sharedHandlersDir(dir: string): string | null {
  const shared = othersMayWrite(dir, statSync(dir), 'go-w')
  return shared && `the handlers folder ${shared.why}: another user could put a handler in it, which would run as this user; none of its handlers is loaded; run \`${shared.fix}\` and restart the worker`
}

/** Why the handler module at `path` is not loaded, when another user owns it or may write it; null when it is this user's or root's alone. */
function sharedHandlerFile(path: string): string | null {
  let stats
  try {
    stats = statSync(path)
  } catch {
    return null // its import says why
  }
  const shared = othersMayWrite(path, stats, 'go-w')
  return shared && `it ${shared.why}: another user could change its code, which would run as this user; run \`${shared.fix}\` and restart the worker`
}

/**
 * Files of a handlers folder that look like handlers but are not loaded: only `*.mjs` files are
 * (`.js` and `.cjs` are not ES modules to Node unless a package.json says so). None when the
 * folder cannot be read (reported as a load problem).
 */
export function ignoredHandlerFiles(handlersDir: string | null): string[] {
  if (!handlersDir) return []
  try {
    return readdirSync(handlersDir)
      .filter((f) => f.endsWith('.js') || f.endsWith('.cjs'))
      .sort()
  } catch {
    return []
  }
}

/**
 * The handler modules at `paths`, imported at once, each settled by `timeoutMs` (the timer also
 * keeps the thread alive while a module waits on nothing). A module that fails settles as a
 * rejection already handled here: one awaited after another could otherwise end the thread as
 * a rejection nobody caught.
 */
function importAll(paths: string[], timeoutMs: number): Promise<unknown>[] {
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`did not finish loading within ${timeoutMs / 1000} s (a top-level await that has not settled?)`)), timeoutMs)
  })
  late.catch(() => {})
  // A module that calls process.exit() as it loads would end the thread, and every handler with
  // it: while the modules load, the call throws instead, and fails that module alone.
  // An error nothing catches meanwhile (a module's timer that throws) ends the thread through
  // process.exit, Node having set `_exiting` first: that call is Node's own, not the module's, and
  // ends the thread, as it must — thrown, it would abort the whole process.
  const exit = process.exit
  const restore = () => {
    process.exit = exit
  }
  process.exit = ((code?: number | string | null) => {
    if ((process as { _exiting?: boolean })._exiting) return exit(code)
    throw new Error(`called process.exit(${code ?? ''}) as it loaded`)
  }) as typeof process.exit
  process.on('uncaughtExceptionMonitor', restore)
  const modules = paths.map((path) => Promise.race([import(pathToFileURL(path).href), late]))
  for (const module of modules) module.catch(() => {})
  void Promise.allSettled(modules).then(() => {
    clearTimeout(timer)
    restore()
    process.off('uncaughtExceptionMonitor', restore)
  })
  return modules
}

/** A job type as a refusal names it: as JSON writes it (a NUL as `\u0000`), its first 40 characters of a longer one. */
function shownType(type: string): string {
  return type.length <= 40 ? JSON.stringify(type) : `${JSON.stringify(type.slice(0, 40))}… (${type.length} characters)`
}

/** How long the syntax check of a handler file that failed to parse may take. */
const SYNTAX_CHECK_TIMEOUT_MS = 5_000

/**
 * Why a handler file did not load, in one line, with the line of the file where it went wrong
 * when that is known: an error thrown by the file's own code names its line in its stack. A
 * syntax error does not: Node's ESM loader keeps the place to itself, and prints it only for an
 * error nobody caught. So a file that does not parse is parsed again by `node --check` (only
 * then, a ~50 ms process), which prints the place on its first line (`<path>:<line>`) and the
 * source line after it. (In the desktop app `process.execPath` is Electron, which runs as Node
 * with ELECTRON_RUN_AS_NODE.)
 */
function loadError(given: string, error: unknown): string {
  const message = error instanceof Error ? error.message.split('\n')[0]! : String(error)
  const name = basename(given)
  // Node names the file by its absolute path, however the folder was given (`--handlers ./handlers`).
  const path = resolve(given)
  if (error instanceof SyntaxError) {
    const check = spawnSync(process.execPath, ['--check', path], {
      encoding: 'utf8',
      timeout: SYNTAX_CHECK_TIMEOUT_MS,
      env: { ...process.env, ELECTRON_RUN_AS_NODE: '1' },
    })
    const [place, source] = (check.stderr ?? '').split('\n')
    const line = place?.startsWith(path) ? /:(\d+)$/.exec(place)?.[1] : undefined
    return line ? `${message} (${name} line ${line}: ${source!.trim()})` : message
  }
  const stack = error instanceof Error ? (error.stack ?? '') : ''
  const frame = stack.split('\n').find((l) => l.includes(pathToFileURL(path).href) || l.includes(path))
  const line = frame ? /:(\d+):\d+\)?$/.exec(frame)?.[1] : undefined
  return line ? `${message} (${name} line ${line})` : message
}
