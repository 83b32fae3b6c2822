import { resolve, sep } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { nextRestart } from '../src-shared/restart-backoff'

/**
 * Handler threads that die again and again before they run a job. A thread that dies as a job
 * runs is replaced at once; one that dies having run none, within {@link SETTLE_MS} of its
 * handlers loading (or as they load), died of something loading set going — a module's timer
 * that throws, say — and its replacement would die the same way. Those deaths in a row are
 * replaced after a growing delay (docs/workers.md, "Threads that die before running a job"),
 * and one whose uncaught error names a handler module in its stack is that module's fault: it is
 * reported as a handler that did not load, and the next threads skip it.
 */

/** How soon after its handlers loaded a thread that dies without having run a job is taken to have died of its loading. */
export const SETTLE_MS = 5_000
/** The delay before the first replacement of a thread that died so; it doubles with each death in a row. */
export const FIRST_RESTART_MS = 100
/** The longest delay between such replacements. */
export const MAX_RESTART_MS = 30_000

/** How a handler thread ended, as its worker saw it. */
export interface ThreadDeath {
  /** The uncaught error that ended it, if one did. */
  cause: Error | null
  /** It ran (or took over) at least one job. */
  ranJobs: boolean
  /** How long after its handlers loaded it died; null: it died as they loaded. */
  readyForMs: number | null
}

/** Whether a thread's death counts among the deaths in a row before any job (see the module's comment). */
export function diedBeforeWork(death: ThreadDeath): boolean {
  return !death.ranJobs && (death.readyForMs === null || death.readyForMs < SETTLE_MS)
}

/** The delay before a thread that so died is replaced, and the deaths in a row with it (`streak`: before it). */
export function nextThreadRestart(streak: number): { failures: number; delayMs: number } {
  return nextRestart(streak, false, MAX_RESTART_MS, FIRST_RESTART_MS)
}

/**
 * The handler module in `handlersDir` whose code an uncaught error's stack names first (its
 * absolute path), or null: the error came from elsewhere (Node's own code, a built-in handler).
 */
export function moduleAtFault(error: Error, handlersDir: string | null): string | null {
  if (!handlersDir || !error.stack) return null
  const dir = resolve(handlersDir)
  const url = pathToFileURL(dir).href
  for (const frame of error.stack.split('\n').slice(1)) {
    // A module's URL may carry a query (a loader's: `late.mjs?tsx-namespace=…`).
    const at = /((?:file:\/\/)?[^\s()?]+\.mjs)(?:\?[^\s()]*)?:\d+:\d+\)?\s*$/.exec(frame)?.[1]
    if (!at) continue
    const path = at.startsWith('file://') ? (at.startsWith(`${url}/`) ? fileURLToPath(at) : null) : at
    if (path && path.startsWith(dir + sep) && !path.slice(dir.length + 1).includes(sep)) return path
  }
  return null
}
