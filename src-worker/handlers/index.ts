import { readdirSync } from 'node:fs'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { type Handler, isHandler } from '../handler-api'
import { execHandler } from './exec'
import { fileWrite } from './file-write'
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
}

export interface LoadedHandlers {
  handlers: Map<string, Handler>
  /** Modules that failed to load: reported and skipped, the rest still load. */
  problems: { file: string; error: string }[]
}

/**
 * The built-in handlers plus every user handler that loads; a user handler may replace a built-in.
 * Two user files of one job type: the later in name order runs, and the earlier is reported as a
 * handler that did not load, naming the other.
 */
export async function loadHandlers(options: HandlerOptions): Promise<LoadedHandlers> {
  const handlers = new Map<string, Handler>()
  for (const handler of [sleep, noop, fileWrite, execHandler(options.execAllow, options.execAllowSetBy)]) handlers.set(handler.type, handler)
  const problems: LoadedHandlers['problems'] = []
  let files: string[] = []
  if (options.handlersDir) {
    try {
      files = readdirSync(options.handlersDir)
        .filter((f) => f.endsWith('.mjs'))
        .sort()
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') problems.push({ file: options.handlersDir, error: (error as Error).message })
    }
  }
  /** The user file each job type was last loaded from. */
  const fileOf = new Map<string, string>()
  for (const file of files) {
    const path = join(options.handlersDir!, file)
    try {
      const module = (await import(pathToFileURL(path).href)) as { default?: unknown }
      const handler = isHandler(module.default) ? module.default : module
      if (!isHandler(handler)) throw new Error('does not export {type, run}')
      const before = fileOf.get(handler.type)
      if (before !== undefined) problems.push({ file: before, error: `job type ${JSON.stringify(handler.type)} is exported by ${file} too, which loads after it (in name order) and runs it` })
      handlers.set(handler.type, handler)
      fileOf.set(handler.type, path)
    } catch (error) {
      problems.push({ file: path, error: (error as Error).message.split('\n')[0]! })
    }
  }
  return { handlers, problems }
}
