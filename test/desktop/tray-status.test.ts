import { expect, test } from 'vitest'
import { capacityFigures } from '../../src-main/engine/rules/capacity'
import { trayMenuLines, trayTooltip } from '../../src-main/desktop/tray-status'

test('the tray tooltip shows capacity in use and open blockers', () => {
  const capacity = capacityFigures(50, 8, 'manual', 6)
  expect(trayTooltip(capacity, 0)).toBe('Leasehold — 6/10 units in use (busy 8), no open blockers')
  expect(trayTooltip(capacity, 1)).toContain('1 open blocker')
  expect(trayTooltip(capacityFigures(10, 2.5, 'auto', 0), 3)).toBe('Leasehold — 0/7 units in use (busy 2.5, auto), 3 open blockers')
})

test('the tray menu names the figures and points to the window for blockers', () => {
  const lines = trayMenuLines(capacityFigures(100, 0, 'auto', 40), 2)
  expect(lines).toEqual(['In use: 40 of 100 usable (100 total)', 'Busy rating: 0 (auto)', 'Open blockers: 2 — answer them in the window'])
})
