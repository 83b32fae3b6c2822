/**
 * Whether `tz`, the value of a `TZ` variable, is a POSIX rule (`CET-1CEST`,
 * `EST5EDT,M3.2.0,M11.1.0`, `<+0545>-5:45`) rather than a zone's name. Such a rule names its zone
 * by letters (or `<+03>`) and then its offset: a digit or a sign. glibc, and so the machine's
 * clock, follows the rule; Node's ICU does not read it and runs on UTC. Only the form is checked:
 * a name that also looks so (`EST5EDT`, a zone of its own) is the caller's to tell apart.
 */
export function isTzRule(tz: string): boolean {
  return /^(<[^>]+>|[A-Za-z]{3,})[+-]?\d/.test(tz)
}

/**
 * The host's `TZ` when it is a rule this runtime reads as UTC while the machine's clock does not
 * (`CET-1CEST`, not UTC's own `UTC0`, nor a zone name of that form the runtime knows, `EST5EDT`);
 * otherwise null. A local time read here under such a `TZ` would be hours away from the clock's.
 */
export function misreadTzRule(tz: string | undefined): string | null {
  if (tz === undefined || !isTzRule(tz) || /^(UTC|GMT|UCT)0$/.test(tz)) return null
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: tz })
    return null
  } catch {
    return tz
  }
}
