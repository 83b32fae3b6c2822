import { parseArgs } from 'node:util'
import { MAX_ID_CHARS } from './limits'
import { printable } from './printable'
import { DOT_SEGMENT_REFUSAL, isDotSegment } from './queue-name'
import { actorNameFault } from './worker-id'

/**
 * The command line's rules that both programs' commands follow — the host's client commands
 * (submit, jobs, status, …) and the worker program's `leasehold worker`: strict flags, whole
 * numbers in a range, the flags that find the host, and one line with exit 2 for a mistake in
 * them.
 */

/** A bad flag or environment value: the CLI prints `message` as one line and exits 2. */
export class ConfigError extends Error {
  override name = 'ConfigError'
}

/**
 * `--units -3` as `--units=-3`: a flag that takes a value takes the word after it that begins
 * with one dash and is no flag: a negative number (whose range message it deserves), or a value
 * such as a token that begins with a dash (the tokens of some releases could). parseArgs refuses
 * such a value as ambiguous (it might be a flag); no flag here is one dash and more than one letter.
 */
export function joinDashedValues(argv: readonly string[], valued: ReadonlySet<string>): string[] {
  const out: string[] = []
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!
    if (arg === '--') return [...out, ...argv.slice(i)]
    const next = argv[i + 1]
    if (arg.startsWith('--') && valued.has(arg.slice(2)) && next !== undefined && /^-(\.?\d|[^-\s]{2,})/.test(next)) {
      out.push(`${arg}=${next}`)
      i++
    } else {
      out.push(arg)
    }
  }
  return out
}

/** The flags every client command takes to find the host. */
export const TARGET_FLAGS = ['url', 'token', 'data-dir'] as const

export const TARGET_HELP = `  --url URL            the host (env LEASEHOLD_URL; default: the host running on this data dir);
                       the dashboard's link serve prints will do: its #token= is the token; a
                       path only as a proxy's prefix (not /api: the command adds that)
  --token TOKEN        the API token (env LEASEHOLD_TOKEN; default: the URL's #token=, else
                       <data-dir>/token); prefer the env: a shell's history keeps a command line
  --data-dir PATH      where to find a local host's URL and token (env LEASEHOLD_DATA_DIR)`

/** {@link TARGET_HELP} for the commands that wait for each answer of the host (all but worker). */
export const CLIENT_TARGET_HELP = `${TARGET_HELP}
  env LEASEHOLD_TIMEOUT_S
                       how long to wait for each answer of the host, 1 to 3600 seconds [30];
                       then one line names the host that did not answer, exit 1`

/**
 * A word a command puts in a URL's path as a segment of its own (a queue's or a schedule's name, a
 * blocker's id): "." or ".." is dropped from the path, and the request would reach a route the
 * host does not have (said as a host of an older release). A usage error naming `command` and
 * what the word should be (`kind`: "a queue name").
 */
export function checkPathSegment(command: string, word: string, kind: string): void {
  if (isDotSegment(word)) throw new ConfigError(`${command}: "${word}" is not ${kind}: ${DOT_SEGMENT_REFUSAL}`)
}

/**
 * A name of who acts given by a flag (`--worker-id`, `--by`): refused before the host is looked
 * for, as the host would refuse it (worker-id.ts), with the flag named.
 */
export function checkActorName(flag: string, name: string): void {
  const fault = actorNameFault(name)
  if (fault !== null) throw new ConfigError(`--${flag} ${fault} (got ${printable(JSON.stringify(name))})`)
  if (name.length > MAX_ID_CHARS) throw new ConfigError(`--${flag} must be 1 to ${MAX_ID_CHARS} characters (got ${name.length})`)
}

/** Parses flags strictly: an unknown flag, a missing value or a stray argument is a ConfigError (exit 2). */
export function parseFlags<T>(argv: string[], strings: readonly string[], booleans: readonly string[] = []): T {
  return parseCommandLine<T>(argv, strings, booleans, false).values
}

/**
 * {@link parseFlags} for a command that also takes words (`leasehold schedule pause NAME`).
 * `elsewhere` names, for a flag of the command's other subcommands, where it belongs ("jobs
 * cancel"): given here it is refused as belonging there rather than as unknown.
 */
export function parseCommandLine<T>(
  argv: string[],
  strings: readonly string[],
  booleans: readonly string[],
  allowPositionals = true,
  elsewhere: Readonly<Record<string, string>> = {},
): { values: T; positionals: string[] } {
  const valued = new Set<string>([...TARGET_FLAGS, ...strings])
  let parsed: ReturnType<typeof parseArgs>
  try {
    parsed = parseArgs({
      args: joinDashedValues(argv, valued),
      options: {
        ...Object.fromEntries([...TARGET_FLAGS, ...strings].map((name) => [name, { type: 'string' as const }])),
        ...Object.fromEntries(booleans.map((name) => [name, { type: 'boolean' as const }])),
      },
      strict: true,
      allowPositionals,
      tokens: true,
    })
  } catch (error) {
    throw flagError(error, [...TARGET_FLAGS, ...strings, ...booleans], elsewhere)
  }
  refuseRepeatedFlags(parsed.tokens ?? [])
  refuseEmptyValues(parsed.values)
  refuseUndecodedText(parsed.values)
  return { values: parsed.values as T, positionals: parsed.positionals }
}

/**
 * `--token ""` (or `--token=`) is a flag whose value was lost (an unset shell variable): said as
 * such (exit 2), not taken as no flag, which would fall back on another token, nor sent empty.
 */
export function refuseEmptyValues(values: Readonly<Record<string, unknown>>): void {
  for (const [name, value] of Object.entries(values)) if (value === '') throw new ConfigError(`--${name} needs a value`)
}

/**
 * A flag given twice with a value (`--type sleep --type noop`, a line edited and run again): no
 * flag of a command is meant to repeat, and taking the last would run what the user may not
 * have meant, so it is a usage error naming the flag and both values. A switch given twice
 * (`--json --json`) says the same twice and passes.
 */
export function refuseRepeatedFlags(tokens: ReadonlyArray<{ kind: string; name?: string; value?: string | undefined }>): void {
  const seen = new Map<string, string>()
  for (const token of tokens) {
    if (token.kind !== 'option' || token.value === undefined) continue
    const earlier = seen.get(token.name!)
    if (earlier !== undefined) throw new ConfigError(`--${token.name} is given twice ("${earlier}", then "${token.value}"): give it once`)
    seen.set(token.name!, token.value)
  }
}

/**
 * The character an argument's bytes that are not UTF-8 become (Node decodes the command line so):
 * stored as it is, a `--type $'\xff'` would name a job type nobody asked for. Refused as an input
 * line of such bytes is (`submit --each`), as not UTF-8 text; a user does not type U+FFFD.
 */
const REPLACEMENT_CHARACTER = '\uFFFD'

/** A flag whose value holds bytes that are not UTF-8 ({@link REPLACEMENT_CHARACTER}): a usage error naming it. */
export function refuseUndecodedText(values: Readonly<Record<string, unknown>>): void {
  for (const [name, value] of Object.entries(values)) {
    if (typeof value === 'string' && value.includes(REPLACEMENT_CHARACTER)) throw new ConfigError(`--${name} is not valid UTF-8 text`)
  }
}

/**
 * `bytes` as UTF-8 text; bytes that are not UTF-8 are a ConfigError naming `from` and the line
 * that holds them, rather than text with U+FFFD in their place, stored as if it were what was sent.
 */
export function utf8Text(from: string, bytes: Buffer): string {
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes)
  } catch {
    const line = new TextDecoder('utf-8').decode(bytes).split('\n').findIndex((text) => text.includes(REPLACEMENT_CHARACTER)) + 1
    throw new ConfigError(`${from} line ${line} is not valid UTF-8 text`)
  }
}

/**
 * parseArgs's refusal as one line. A parser that takes words adds to "Unknown option '--x'" a
 * hint about '--' (with an unclosed quote) that no command here needs, as none takes a word
 * starting with a dash: every command says just "Unknown option '--x'", and names the flag the
 * user most likely meant among the command's own `flags` ({@link likelyFlag}), or the
 * subcommand a flag of the command's belongs to (`elsewhere`). A flag whose value is missing
 * (last, or followed by another flag: `--data-dir --json`) "needs a value".
 */
export function flagError(error: unknown, flags: readonly string[] = [], elsewhere: Readonly<Record<string, string>> = {}): ConfigError {
  const code = (error as { code?: string }).code
  const line = (error as Error).message.split('\n')[0]!.replace(/\. To specify a positional argument starting with a '-'.*$/, '')
  const valueless = code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE' ? /^Option '(--[^' ]+)(?: <value>)?' argument (?:missing|is ambiguous)/.exec(line)?.[1] : undefined
  if (valueless !== undefined) return new ConfigError(`${valueless} needs a value`)
  // The version is the program's, asked before any command: `leasehold status -v` names that.
  if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' && /^Unknown option '(?:-v|--version)'$/.test(line)) return new ConfigError(`${line}: the version is \`leasehold --version\`, given before any command`)
  const unknown = code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' ? /'--([^'=]+)/.exec(line)?.[1] : undefined
  if (unknown !== undefined && elsewhere[unknown] !== undefined) return new ConfigError(`--${unknown} belongs to ${elsewhere[unknown]}`)
  const meant = unknown === undefined ? undefined : likelyFlag(unknown, flags)
  if (meant) return new ConfigError(`${line} (did you mean --${meant}?)`)
  // A typo of another subcommand's flag (`jobs --reasn`) is named with its home.
  const meantElsewhere = unknown === undefined ? undefined : likelyFlag(unknown, Object.keys(elsewhere))
  return new ConfigError(meantElsewhere ? `${line} (did you mean --${meantElsewhere}? it belongs to ${elsewhere[meantElsewhere]})` : line)
}

/**
 * An environment variable's value, or undefined when it is unset or empty: `LEASEHOLD_TOKEN=`
 * (or a variable exported from an unset one) says nothing, and must not stand in the way of what
 * comes after it, as an empty flag would (that one is a usage error: {@link parseCommandLine}).
 */
export function envSetting(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const value = env[name]
  // Node decodes the environment as it decodes the command line: bytes that are not UTF-8 come
  // as U+FFFD, and a LEASEHOLD_DATA_DIR so decoded would name another folder than the user's.
  if (value?.includes(REPLACEMENT_CHARACTER)) throw new ConfigError(`${name} is not valid UTF-8 text`)
  return value === undefined || value === '' ? undefined : value
}

/**
 * Why a path (a data dir) is refused, or null: one that begins or ends with whitespace (`--data-dir
 * " "`, a variable set with a trailing space) names another folder than the one meant, and a host
 * would make it, new and empty, with a new token.
 */
export function edgeWhitespaceProblem(path: string): string | null {
  return path.trim() === path ? null : `begins or ends with whitespace, which would name another folder than the one meant: remove it`
}

/** A comma-separated list's entries, each trimmed, blanks left out. */
export const listEntries = (value: string): string[] => value.split(',').map((entry) => entry.trim()).filter(Boolean)

/**
 * Why a comma-separated list is refused when it names nothing (`","`, `" "`): a value given that
 * way is a mistake (an unset shell variable between commas), not a way to say none. Null for a list
 * that names something, and for no value at all.
 */
export function emptyListProblem(value: string, what: string): string | null {
  return value !== '' && listEntries(value).length === 0 ? `names no ${what}: it holds only commas and blanks (leave it out for none)` : null
}

/**
 * Warnings, one line each, for the LEASEHOLD_* variables of `env` that no command reads (`known`
 * holds those that some command does): a misspelt one (`LEASEHOLD_ALLOWED_HOST`) would otherwise
 * be ignored without a word, with the likely one meant named when one is near.
 */
export function unknownVariableWarnings(env: NodeJS.ProcessEnv, known: readonly string[]): string[] {
  // Compared as flags are (`allowed-hosts`), so that the flags' synonyms and typos serve here too.
  const word = (name: string) => name.replace(/^LEASEHOLD_/, '').toLowerCase().replace(/_/g, '-')
  return Object.keys(env)
    .filter((name) => name.startsWith('LEASEHOLD_') && !known.includes(name))
    .sort()
    .map((name) => {
      const meant = likelyFlag(word(name), known.map(word))
      return `leasehold: warning: ${name} is no variable Leasehold reads, and is ignored${meant ? ` (did you mean LEASEHOLD_${meant.toUpperCase().replace(/-/g, '_')}?)` : ''}`
    })
}

/**
 * Words a user brings from other schedulers for a flag that has another name here: "retries"
 * or "delay" name `--max-attempts` and `--in`. (The API's own fields are {@link FIELD_FLAGS}.)
 */
const FLAG_SYNONYMS: Readonly<Record<string, string>> = {
  cost: 'units',
  attempts: 'max-attempts',
  retries: 'max-attempts',
  'max-retries': 'max-attempts',
  delay: 'in',
  'idempotency-key': 'key',
  'dedupe-key': 'key',
  // serve's: the API's capacity fields and a lease's TTL (PUT /api/capacity, a lease request's ttl_sec).
  'busy-rating': 'busy',
  capacity: 'total-units',
  'ttl-sec': 'lease-ttl-s',
}

/**
 * The flag among `flags` that `typed` most likely meant: a synonym of it, the only flag it
 * begins (`--prio`), or the one nearest by a typo or two (`--priorty`, `--untis`); undefined
 * when none is close enough to name.
 */
export function likelyFlag(typed: string, flags: readonly string[]): string | undefined {
  // The API's field, as written there (`--cost_units`) or with dashes (`--cost-units`, `--run-at`).
  const synonym = FLAG_SYNONYMS[typed.replace(/_/g, '-')] ?? FIELD_FLAGS[typed.replace(/-/g, '_')]
  if (synonym !== undefined && flags.includes(synonym)) return synonym
  const begun = flags.filter((flag) => typed.length >= 3 && flag.startsWith(typed))
  if (begun.length === 1) return begun[0]
  const allowed = typed.length <= 4 ? 1 : 2
  const near = flags.map((flag) => ({ flag, d: typoDistance(typed, flag) })).filter(({ d }) => d <= allowed)
  const best = Math.min(...near.map(({ d }) => d))
  const nearest = near.filter(({ d }) => d === best)
  return nearest.length === 1 ? nearest[0]!.flag : undefined
}

/** Edits (an insert, a delete, a change, or two neighbours swapped) from `a` to `b`. */
function typoDistance(a: string, b: string): number {
  const d = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)))
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const change = a[i - 1] === b[j - 1] ? 0 : 1
      d[i]![j] = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + change)
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d[i]![j] = Math.min(d[i]![j]!, d[i - 2]![j - 2]! + 1)
    }
  }
  return d[a.length]![b.length]!
}

/**
 * Whether `value` is a whole number written in plain decimal (an optional minus, then digits).
 * Number() also takes "", " 3", "0x5", "1e1" and "+3", which a user who typed them did not mean
 * as 0, 3, 5, 10 and 3: every numeric flag and variable is held to this. "-0" is none: a range
 * check reads it as 0 (`--port -0` a free port), though a minus says the user meant another number.
 */
export const isPlainWholeNumber = (value: string): boolean => /^(\d+|-0*[1-9]\d*)$/.test(value)

/** A flag's whole number from `min` to `max`, or undefined when it was not given; anything else is a ConfigError. */
export function wholeNumber(flag: string, value: string | undefined, min: number, max: number): number | undefined {
  return wholeNumberOf(`--${flag}`, value, min, max)
}

/** {@link wholeNumber} of a flag or an environment variable, named as `source`. */
export function wholeNumberOf(source: string, value: string | undefined, min: number, max: number): number | undefined {
  if (value === undefined) return undefined
  const n = Number(value)
  if (!isPlainWholeNumber(value) || !Number.isSafeInteger(n) || n < min || n > max) {
    throw new ConfigError(`${source} must be a whole number from ${min} to ${max} (got "${value}")`)
  }
  return n
}

/**
 * The fields of the API's bodies and queries that a client command's flags fill, by the flag
 * that fills each: read in the host's refusals, and (where the names differ) in a flag typed as
 * the field (`--cost_units`, `--run-at`).
 */
const FIELD_FLAGS: Readonly<Record<string, string>> = {
  job_type: 'type',
  cost_units: 'units',
  addon_id: 'addon',
  client_request_id: 'key',
  run_at: 'at',
  delay_ms: 'in',
  max_attempts: 'max-attempts',
  requested_by: 'by',
  timezone: 'tz',
  queue: 'queue',
  priority: 'priority',
  cron: 'cron',
  overlap: 'overlap',
  cursor: 'cursor',
  limit: 'limit',
  state: 'state',
  reason: 'reason',
  note: 'note',
}

/** The host's codes for a value it refuses (all 400): a mistake in what the user gave, as a bad flag is. */
const VALUE_REFUSALS: ReadonlySet<string> = new Set(['invalid_request', 'cost_exceeds_capacity', 'invalid_cron', 'invalid_timezone'])

/**
 * Whether a cost_exceeds_capacity refusal is of a cost the request gave (a submit's or a
 * schedule's `cost_units`, filled by `--units`), not the cost of a job that exists (a retry's,
 * which names no field): that one is no mistake in what the user typed, and exits 1.
 */
const namesSentCost = (detail: string): boolean => /^(?:job\.)?cost_units: /.test(detail)

/**
 * The host's 400 refusal of a value to a client command: a value of the user's that the host
 * refuses (a `--queue` too long, a `--units` over the whole capacity, a `--cron` it cannot read,
 * a `--cursor` it never gave out) is the user's mistake as much as one the command refuses
 * itself, and exits 2 as one, naming the flag that gave the field ("client_request_id: …" is
 * "--key: …", a schedule's "job.queue: …" is "--queue: …").
 */
function usageRefusal(error: unknown): string | null {
  const refused = error as { status?: unknown; code?: unknown; detail?: unknown }
  if (refused.status !== 400 || typeof refused.code !== 'string' || !VALUE_REFUSALS.has(refused.code) || typeof refused.detail !== 'string') return null
  if (refused.code === 'cost_exceeds_capacity' && !namesSentCost(refused.detail)) return null
  const named = refused.detail.replace(/(^|; )(?:job\.)?([a-z_]+): /g, (whole: string, before: string, field: string) => (FIELD_FLAGS[field] ? `${before}--${FIELD_FLAGS[field]}: ` : whole))
  return `${named} (${refused.code})`
}

/** Runs a client command; a bad flag or value (exit 2) or an unreachable host (exit 1) is one line. */
export async function runClient(command: () => Promise<number>): Promise<number> {
  // The line quotes what the user gave and what the host said (a refusal's detail, a job's
  // error): either may hold control characters, shown escaped.
  const say = (line: string) => console.error(`leasehold: ${printable(line)}`)
  try {
    return await command()
  } catch (error) {
    if (error instanceof ConfigError) {
      say(error.message)
      return 2
    }
    const refusal = usageRefusal(error)
    if (refusal !== null) {
      say(refusal)
      return 2
    }
    say((error as Error).message)
    return 1
  }
}

/**
 * The exit status of a wait that `--wait-timeout` ended before the job did: 124, as timeout(1)
 * exits, so that a script can tell "still going" from FAILED (1). The job is left as it is. A
 * bulk action whose answer did not come in time exits so too: the host carries it on.
 * Here, not beside the wait, so that a command that only exits so loads none of the wait's
 * stream client.
 */
export const WAIT_TIMED_OUT_EXIT = 124

/**
 * The exit status of a command whose reader closed its output (`leasehold jobs | head -1`): 141,
 * what a shell reports for a program that SIGPIPE ended (128 + 13), as `yes | head` does. Node
 * ignores SIGPIPE, and a write to the closed pipe fails with EPIPE instead.
 */
export const CLOSED_OUTPUT_EXIT = 141

let outputWatched = false

/** What a command has done that the output it could not write would have said ({@link sayWhenOutputFails}). */
let doneSoFar: (() => string) | null = null

/**
 * Names what the command has done so far, for the line that says its output could not be written
 * (a full disk under `> file`): a job submitted whose id was to be that output must not go
 * unsaid, or a run again would submit it twice. Said on stderr with that line.
 */
export function sayWhenOutputFails(done: () => string): void {
  doneSoFar = done
}

/**
 * The end of a one-shot command whose output failed: a closed pipe (EPIPE) quietly with
 * {@link CLOSED_OUTPUT_EXIT}, as whoever read it wants no more; another failure (ENOSPC) with one
 * line on stderr, naming what was done ({@link sayWhenOutputFails}), and exit 1.
 */
function endForFailedOutput(error: NodeJS.ErrnoException): never {
  if (error.code === 'EPIPE') process.exit(CLOSED_OUTPUT_EXIT)
  process.stderr.write(`leasehold: cannot write the output (${error.code ?? error.message})${doneSoFar ? `; ${doneSoFar()}` : ''}\n`)
  process.exit(1)
}

/**
 * Ends a one-shot command whose output has failed, before it does more: a write to a closed pipe
 * (EPIPE) or a full disk (ENOSPC) fails at once, but the 'error' event that ends the command
 * ({@link watchClosedOutput}) comes a few ticks later, and a request started meanwhile would
 * still go out (`submit --each … | head -1` would send its next batch), a line meant to follow
 * the output still be printed.
 */
export function stopIfOutputFailed(): void {
  const error = process.stdout.errored as NodeJS.ErrnoException | null
  if (error) endForFailedOutput(error)
}

/**
 * How a command takes its output being closed: `end` (a one-shot command: whoever read it wants
 * no more, so it stops at once, without a message — there is nowhere to print one — and with
 * {@link CLOSED_OUTPUT_EXIT}; any other failure to write it is one line and exit 1); `ignore`
 * (serve and worker: they print a line or two as they start, and a process that runs jobs or
 * holds the database does not stop because nobody reads them; what they would print is dropped).
 * Stderr is for information: a command whose stderr cannot be written (`2>/dev/full`, a closed
 * pipe) goes on, with the result and exit status it has otherwise. Without a listener the failed
 * write is an unhandled 'error' event: a stack trace.
 */
export function watchClosedOutput(how: 'end' | 'ignore'): void {
  if (outputWatched) return
  outputWatched = true
  process.stderr.on('error', () => {})
  process.stdout.on('error', (error: NodeJS.ErrnoException) => {
    if (how === 'end') endForFailedOutput(error)
  })
}
