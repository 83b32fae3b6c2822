import cronstrue from 'cronstrue'

/** A cron expression in words, or why it could not be put in words. */
export type CronWords = { words: string; problem: null } | { words: null; problem: string }

const OPTIONS = { use24HourTimeFormat: true, throwExceptionOnParseError: true } as const

/**
 * A cron expression explained in words, for people: `0 2 * * *` → "At 02:00, every day",
 * `0 9 * * 1-5` → "At 09:00, Monday through Friday", a step of 15 minutes → "Every 15 minutes".
 * cronstrue's short form leaves "every day" out of a daily time and its long one adds "every
 * hour, every day" to every interval: the long form is used where it only adds "every day".
 * The host's parser (croner) decides what is valid; an expression cronstrue cannot read (croner's
 * `+` on the weekday, say) has a `problem` but may still be accepted by the host.
 */
export function describeCron(expression: string): CronWords {
  const cron = expression.trim()
  if (cron === '') return { words: null, problem: 'empty' }
  try {
    const short = cronstrue.toString(cron, { ...OPTIONS, verbose: false })
    const long = cronstrue.toString(cron, { ...OPTIONS, verbose: true })
    return { words: long === `${short}, every day` && short.startsWith('At ') ? long : short, problem: null }
  } catch (error) {
    return { words: null, problem: String(error instanceof Error ? error.message : error).replace(/^Error:\s*/, '') }
  }
}
