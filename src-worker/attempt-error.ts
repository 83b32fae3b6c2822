import { inspect } from 'node:util'
import { MAX_ERROR_CHARS, MAX_ID_CHARS } from '../src-shared/worker-exchange'
import type { AttemptError } from './transport'

/**
 * How a handler's thrown value is reported as its attempt's error: its code (or `aborted`,
 * `handler_error`), message and stack, each cut to what the worker exchange carries, so that an
 * error of any size is recorded — cut, with a mark — instead of making the host refuse the
 * whole exchange. A handler says "do not retry" with `retryable: false`. A thrown value with no
 * message of its own (a plain object, a number) is written as `util.inspect` writes it, not as
 * `String()` would (`[object Object]`). Never throws: a field that cannot be read (a proxy whose
 * trap throws, a getter that does) counts as absent, where a throw here, in the catch of the
 * handler's run, would end its whole thread.
 */
export function attemptErrorOf(error: unknown): AttemptError {
  const [name, code, message, stack, retryable] = (['name', 'code', 'message', 'stack', 'retryable'] as const).map((key) => fieldOf(error, key))
  return {
    code: cut(typeof code === 'string' && code ? code : name === 'AbortError' ? 'aborted' : 'handler_error', MAX_ID_CHARS),
    message: cut(typeof message === 'string' ? message : textOf(error), MAX_ERROR_CHARS),
    ...(typeof stack === 'string' ? { stack: cut(stack, MAX_ERROR_CHARS) } : {}),
    retryable: retryable !== false,
  }
}

/** A field of a thrown value, or undefined when it has none or reading it throws. */
function fieldOf(value: unknown, key: string): unknown {
  try {
    return (value as Record<string, unknown> | null | undefined)?.[key]
  } catch {
    return undefined
  }
}

/** A thrown value that is no Error, as a person reads it; its strings cut as the message would be, so a huge one costs no more. */
function textOf(value: unknown): string {
  if (typeof value === 'string') return value
  try {
    return inspect(value, { depth: 4, breakLength: Number.POSITIVE_INFINITY, maxStringLength: MAX_ERROR_CHARS, maxArrayLength: 100 })
  } catch {
    // A proxy whose traps throw, say: its kind is still something to go by, if even that can be read.
    try {
      return Object.prototype.toString.call(value)
    } catch {
      return `a thrown ${typeof value} that cannot be read`
    }
  }
}

/** What a failure report keeps of its message when the whole report is too large to send (report-budget.ts, handler-output.ts). */
export const SHORT_MESSAGE_CHARS = 1000

/**
 * A failure made small enough for any host: its message cut to {@link SHORT_MESSAGE_CHARS} and no
 * stack; its code and whether it is retryable are kept.
 */
export function shortened<E extends { message?: string; stack?: string }>(error: E): Omit<E, 'stack'> & { message: string } {
  const { stack: _stack, ...rest } = error
  return { ...rest, message: wellFormed((error.message ?? '').slice(0, SHORT_MESSAGE_CHARS)) }
}

const MARK = '… (cut)'

/**
 * `text`, cut to `max` characters with a mark where it is longer, and well-formed: a lone
 * surrogate (the handler's own, or half of a pair the cut split) is U+FFFD, since the host
 * refuses a body that holds one (src-shared/json-faults.ts) and would drop the whole report.
 */
export function cut(text: string, max: number): string {
  return wellFormed(text.length <= max ? text : text.slice(0, max - MARK.length) + MARK)
}

/** ES2024's String.prototype.toWellFormed (Node 20 has it; the compiler's lib is ES2023). */
const wellFormed = (text: string): string => (text as unknown as { toWellFormed(): string }).toWellFormed()
