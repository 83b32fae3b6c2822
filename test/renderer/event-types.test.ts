import { expect, test } from 'vitest'
import { EVENT_TYPES } from '../../src-main/engine'
import { EVENT_TYPES as LISTENED } from '../../src-renderer/lib/live.svelte'

test("the dashboard's stream listens to the host's own list of event types: the same object, never a copy", () => {
  expect(LISTENED).toBe(EVENT_TYPES)
})
