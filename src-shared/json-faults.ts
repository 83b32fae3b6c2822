/**
 * What a JSON value may not hold though JSON's grammar allows it, for the host's bodies and for
 * the command line's payloads alike (so `leasehold submit` refuses, before sending, what the host
 * would). No imports: the command line loads it at start.
 */

/**
 * JSON.parse accepts any depth, but storing a value (JSON.stringify) overflows the stack at a
 * few thousand levels: deeper bodies are refused up front rather than failing with a 500.
 */
export const MAX_JSON_DEPTH = 512

/**
 * What a body's value may not hold though JSON's grammar allows it, each refused as 400
 * `invalid_request` because the value would not read back as sent:
 * - `depth`: nested deeper than {@link MAX_JSON_DEPTH} levels;
 * - `text`: a string, or an object's key, that is not well-formed Unicode. JSON can spell a
 *   lone surrogate (`"\ud800"`), which no UTF-8 text can hold: SQLite stores it as U+FFFD, so
 *   three different `client_request_id`s would read back as one. Every string of every body
 *   is held to it, payloads included: an id, a tag, a note or a path is stored as text, and one
 *   rule for all is cheaper and plainer than a list of the fields that are;
 * - `number`: a number a double cannot hold (`1e400`), which JSON.parse makes `Infinity` and
 *   JSON.stringify writes back as `null`.
 */
export type FaultKind = 'depth' | 'text' | 'number'

const FAULTS: Record<FaultKind, string> = {
  depth: `JSON nested deeper than ${MAX_JSON_DEPTH} levels`,
  text: 'must be well-formed Unicode (no lone surrogates: "\\ud800" alone has no UTF-8 form)',
  number: 'a number too large for a double (JSON numbers are read as doubles)',
}

/** ES2024's String.prototype.isWellFormed (Node 20 has it; the compiler's lib is ES2023): no lone surrogate. */
const isWellFormed = (text: string): boolean => (text as unknown as { isWellFormed(): boolean }).isWellFormed()

/** How {@link faultIn} looks: nested at most `maxDepth` levels; for faults of one kind `only`. */
export interface FaultLimits {
  maxDepth?: number
  only?: FaultKind
}

/**
 * The first {@link FaultKind} in a body's value, and with `named` the path to it. One walk of
 * the value every body already had for its depth, without recursion (a recursive walk would
 * overflow on the very input it guards against); the path is kept only when `named`, to word
 * the refusal after a first walk found a fault. A part of a body (a handler's result, which an
 * exchange carries a few levels in) is held to a smaller `maxDepth`.
 */
export function faultIn(value: unknown, named: boolean, { maxDepth = MAX_JSON_DEPTH, only }: FaultLimits = {}): { kind: FaultKind; path: (string | number)[] } | null {
  const items: unknown[] = [value]
  const depths: number[] = [1]
  const paths: (string | number)[][] = [[]]
  const fault = (kind: FaultKind, path: (string | number)[] | undefined) => ({ kind, path: path ?? [] })
  const looks = (kind: FaultKind) => only === undefined || only === kind
  while (items.length > 0) {
    const item = items.pop()
    const depth = depths.pop()!
    const path = named ? paths.pop() : undefined
    if (typeof item === 'string') {
      if (looks('text') && !isWellFormed(item)) return fault('text', path)
      continue
    }
    if (typeof item === 'number') {
      if (looks('number') && !Number.isFinite(item)) return fault('number', path)
      continue
    }
    if (item === null || typeof item !== 'object') continue
    if (depth > maxDepth && looks('depth')) return fault('depth', [])
    if (Array.isArray(item)) {
      for (let i = 0; i < item.length; i++) {
        items.push(item[i])
        depths.push(depth + 1)
        if (path) paths.push([...path, i])
      }
      continue
    }
    for (const key in item) {
      if (looks('text') && !isWellFormed(key)) return fault('text', path)
      items.push((item as Record<string, unknown>)[key])
      depths.push(depth + 1)
      if (path) paths.push([...path, key])
    }
  }
  return null
}

/**
 * The refusal of a value with a fault of `kind`, naming where as a zod refusal names a field
 * (`jobs.0.payload.n`; `prefix` names the value itself, as `payload`), or `(body)` for the
 * value as a whole.
 */
export function faultDetail(value: unknown, kind: FaultKind, prefix: (string | number)[] = []): string {
  const path = [...prefix, ...(kind === 'depth' ? [] : (faultIn(value, true)?.path ?? []))]
  return `${path.length > 0 ? path.join('.') : '(body)'}: ${FAULTS[kind]}`
}
