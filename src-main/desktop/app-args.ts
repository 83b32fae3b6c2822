import { SERVE_FLAGS } from '../config'

/** A command line split into Leasehold's own flags and everything else. */
export interface SplitArgs {
  /** `--name value` / `--name=value` pairs of `leasehold serve`'s flags, in their order. */
  leasehold: string[]
  /** Every other argument, untouched: Chromium's and Electron's switches, the app path (`.`). */
  others: string[]
}

const NAMES: ReadonlySet<string> = new Set(SERVE_FLAGS.map((flag) => flag.name))

/**
 * Picks `leasehold serve`'s flags out of a command line that also carries Chromium's switches
 * (`--no-sandbox`, `--inspect=0`, `--remote-debugging-port=0`, …). A flag is Leasehold's when its
 * name is exactly one of SERVE_FLAGS; its value is the next argument (or follows `=`). Nothing
 * else is read or rejected here, because Chromium's switches are not ours to know: a misspelt
 * Leasehold flag is therefore left to Chromium too, which ignores it.
 */
export function splitArgs(argv: readonly string[]): SplitArgs {
  const leasehold: string[] = []
  const others: string[] = []
  for (let index = 0; index < argv.length; index += 1) {
    const arg = argv[index]!
    const name = /^--([a-z-]+)(=|$)/.exec(arg)
    if (!name || !NAMES.has(name[1]!)) {
      others.push(arg)
    } else if (name[2] === '=') {
      leasehold.push(arg)
    } else {
      // `--port` as the last argument stays alone, so parseServeArgs reports the missing value.
      leasehold.push(arg, ...argv.slice(index + 1, index + 2))
      index += 1
    }
  }
  return { leasehold, others }
}
