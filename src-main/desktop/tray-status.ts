import type { CapacityFigures } from '../engine/rules/capacity'

/** What the tray icon says: capacity in use and open blockers, at a glance. */
export function trayTooltip(capacity: CapacityFigures, openBlockers: number): string {
  const blockers = openBlockers === 0 ? 'no open blockers' : openBlockers === 1 ? '1 open blocker' : `${openBlockers} open blockers`
  return `Leasehold — ${capacity.leased}/${capacity.usable} units in use (busy ${capacity.busy_rating}${capacity.busy_mode === 'auto' ? ', auto' : ''}), ${blockers}`
}

/** The tray menu's status lines (not clickable). */
export function trayMenuLines(capacity: CapacityFigures, openBlockers: number): string[] {
  return [
    `In use: ${capacity.leased} of ${capacity.usable} usable (${capacity.total_units} total)`,
    `Busy rating: ${capacity.busy_rating} (${capacity.busy_mode})`,
    openBlockers === 0 ? 'No open blockers' : `Open blockers: ${openBlockers} — answer them in the window`,
  ]
}
