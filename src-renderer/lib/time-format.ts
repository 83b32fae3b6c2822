/** How the dashboard writes times and durations; pure, so the tests can pin them. */

const SECOND = 1000
const MINUTE = 60 * SECOND
const HOUR = 60 * MINUTE
const DAY = 24 * HOUR
const YEAR = 365.25 * DAY
const MONTH = YEAR / 12
/** From here a duration reads in months: `2 d 4 h` is exact enough, `26473 d 20 h` is no figure a person reads. */
const MONTHS_FROM = 60 * DAY
/** From here in years (`72 years`), below it in months (`18 months`). */
const YEARS_FROM = 2 * YEAR

/** A time as the host sends it (ISO-8601), or as epoch milliseconds (older stored events); null or undefined for none. */
export type TimeValue = string | number | null | undefined

/** Epoch milliseconds of a time; null for none or for what is not a time. */
export function ms(at: TimeValue): number | null {
  if (typeof at === 'number') return Number.isFinite(at) ? at : null
  if (!at) return null
  const value = Date.parse(at)
  return Number.isNaN(value) ? null : value
}

/**
 * Time left until a deadline as a clock, `m:ss` (or `h:mm:ss`), rounded up so that `0:00` is
 * only shown once the deadline has passed; `expired` after it.
 */
export function formatCountdown(remainingMs: number): string {
  if (remainingMs <= 0) return 'expired'
  const total = Math.ceil(remainingMs / SECOND)
  const h = Math.floor(total / 3600)
  const m = Math.floor((total % 3600) / 60)
  const s = total % 60
  const ss = String(s).padStart(2, '0')
  return h > 0 ? `${h}:${String(m).padStart(2, '0')}:${ss}` : `${m}:${ss}`
}

/**
 * A duration in its two largest units: `4 s`, `2 min 5 s`, `3 h 12 min`, `2 d 4 h`; past about
 * 60 days in whole months (`3 months`), and past two years in whole years (`72 years`): a time
 * that far off is shown with its date beside it, which says it exactly.
 */
export function formatDuration(durationMs: number): string {
  const d = Math.max(0, durationMs)
  if (d < MINUTE) return `${Math.floor(d / SECOND)} s`
  if (d < HOUR) {
    const s = Math.floor((d % MINUTE) / SECOND)
    return `${Math.floor(d / MINUTE)} min${s ? ` ${s} s` : ''}`
  }
  if (d < DAY) {
    const m = Math.floor((d % HOUR) / MINUTE)
    return `${Math.floor(d / HOUR)} h${m ? ` ${m} min` : ''}`
  }
  if (d >= YEARS_FROM) return `${Math.floor(d / YEAR)} years`
  if (d >= MONTHS_FROM) return `${Math.round(d / MONTH)} months`
  const h = Math.floor((d % DAY) / HOUR)
  return `${Math.floor(d / DAY)} d${h ? ` ${h} h` : ''}`
}

/** How long ago something happened: `just now`, `12 s ago`, `3 min ago`. */
export function formatAge(sinceMs: number | null, nowMs: number): string {
  if (sinceMs === null) return 'never'
  const age = nowMs - sinceMs
  if (age < SECOND) return 'just now'
  return `${formatDuration(age)} ago`
}

/*
 * The window's one way of writing a time of day, everywhere a time shows (tables, the job page,
 * the storage text, chart axes, waiting lines, the timeline): the user's locale decides the
 * hour cycle and separators (`21:47:10` in en-GB or de-DE, `9:47:10 PM` in en-US), a time
 * on another day than today carries its date, and one in another year than this its year too
 * (a schedule's next runs may be years apart). `locale` is for tests; the window leaves it out.
 */
const STYLES = {
  time: { hour: 'numeric', minute: 'numeric', second: 'numeric' },
  day: { month: 'short', day: 'numeric' },
  year: { year: 'numeric', month: 'short', day: 'numeric' },
} satisfies Record<string, Intl.DateTimeFormatOptions>

const formatters = new Map<string, Intl.DateTimeFormat>()

/** The formatter of a style in a locale, made once (they are costly to make, cheap to use). */
function formatter(style: keyof typeof STYLES, locale: string | undefined): Intl.DateTimeFormat {
  const key = `${locale ?? ''}|${style}`
  let made = formatters.get(key)
  if (!made) {
    made = new Intl.DateTimeFormat(locale, STYLES[style])
    formatters.set(key, made)
  }
  return made
}

const sameDay = (a: number, b: number) => new Date(a).toDateString() === new Date(b).toDateString()

const sameYear = (a: number, b: number) => new Date(a).getFullYear() === new Date(b).getFullYear()

/** A time as the window writes it: `21:47:10` (or `9:47:10 PM`) today, `Nov 3 21:47:10` on another day, `Jan 1, 2028 00:00:00` in another year; `—` for none. */
export function formatClock(at: TimeValue, nowMs: number, locale?: string): string {
  const when = ms(at)
  if (when === null) return '—'
  const time = formatter('time', locale).format(when)
  if (sameDay(when, nowMs)) return time
  return `${formatter(sameYear(when, nowMs) ? 'day' : 'year', locale).format(when)} ${time}`
}

/** A time to the minute: the time as written with seconds, less its seconds, so an axis and a table write a time alike in every locale. */
function toTheMinute(time: Intl.DateTimeFormat, when: number): string {
  const parts = time.formatToParts(when)
  const at = parts.findIndex((part) => part.type === 'second')
  // The seconds go with the separator before them (`:`).
  const kept = at > 0 ? [...parts.slice(0, at - 1), ...parts.slice(at + 1)] : parts
  return kept.map((part) => part.value).join('')
}

/**
 * A chart's time axis labels (ticks in epoch seconds, as uPlot gives them), written as every
 * other time: the time of day to the minute, and under it, on a line of its own, the date at the
 * first tick of each day (so that label is no wider than the others); dates alone when the ticks
 * are a day or more apart.
 */
export function axisLabels(ticksS: readonly number[], locale?: string): string[] {
  const spacing = ticksS.length > 1 ? (ticksS[1]! - ticksS[0]!) * SECOND : 0
  return ticksS.map((tick, i) => {
    const when = tick * SECOND
    const date = formatter('day', locale).format(when)
    if (spacing >= DAY) return date
    const time = toTheMinute(formatter('time', locale), when)
    return i === 0 || !sameDay(when, ticksS[i - 1]! * SECOND) ? `${time}\n${date}` : time
  })
}

/** The narrowest a chart's value axis is (CSS px), and the room its ticks and padding take beside the widest label. */
export const VALUE_AXIS_MIN_PX = 40
export const VALUE_AXIS_PAD_PX = 18

/** How wide a chart's value axis is (CSS px): as its widest label (`20,000` needs more than the minimum), measured by `width`. */
export function valueAxisWidth(labels: readonly string[], width: (line: string) => number): number {
  if (labels.length === 0) return VALUE_AXIS_MIN_PX
  return Math.max(VALUE_AXIS_MIN_PX, Math.ceil(Math.max(...labels.map(width))) + VALUE_AXIS_PAD_PX)
}

/** Room left between two neighbouring labels of a time axis (CSS px). */
export const AXIS_LABEL_GAP_PX = 12

/**
 * How far apart (CSS px) a chart's time axis puts its ticks at least, so that no two labels
 * touch: each label is centred on its tick, so two neighbours need the widest line any label can
 * have in this locale (a time of day to the minute, or a date), measured by `width` in the axis's
 * font, and a gap.
 */
export function axisTickSpace(width: (line: string) => number, locale?: string): number {
  const lines: string[] = []
  for (let hour = 0; hour < 24; hour++) {
    for (const minute of [0, 8, 38, 58]) lines.push(toTheMinute(formatter('time', locale), new Date(2026, 0, 1, hour, minute).getTime()))
  }
  for (let month = 0; month < 12; month++) lines.push(formatter('day', locale).format(new Date(2026, month, 28).getTime()))
  return Math.ceil(Math.max(...lines.map(width))) + AXIS_LABEL_GAP_PX
}
