/**
 * Where keyboard focus goes when what held it leaves the page: a button that disappears (a
 * blocker's Retry, once answered) or turns disabled (New schedule, once its form is open) drops
 * focus to the page itself, and a keyboard user starts again from the top.
 */

/**
 * Whether focus has fallen out of the page's elements (to the page itself, or nowhere), or is on a
 * control that went off: a browser takes focus from a disabled button, at once or a moment later.
 */
const focusLost = (): boolean => {
  const active = document.activeElement
  return active === null || active === document.body || (active as Partial<HTMLButtonElement>).disabled === true
}

/** A Svelte action for a form: as it appears, focus moves to its first field that takes input. */
export function focusFirstField(node: HTMLElement): void {
  node.querySelector<HTMLElement>('input:not([disabled]), select:not([disabled]), textarea:not([disabled])')?.focus()
}

/**
 * A Svelte action for what replaces a focused element that went or went off (a resolved blocker's
 * answer, in place of the buttons that gave it; a job row's state, its Cancel gone): as `take`
 * comes to hold, it takes focus if focus fell out of the page, never from where the operator moved
 * it. The node needs `tabindex="-1"`.
 */
export function takeLostFocus(node: HTMLElement, take: boolean) {
  // Looked at once the page is updated: what held focus may go later in the same update (a row's
  // Cancel, in a cell after the one that takes focus).
  const maybe = (now: boolean) => {
    if (now) queueMicrotask(() => focusIfLost(node))
  }
  maybe(take)
  return { update: maybe }
}

/** Gives `node` the focus if focus fell out of the page (what held it went: a form that closed). */
export function focusIfLost(node: HTMLElement | undefined): void {
  if (node?.isConnected && focusLost()) node.focus()
}
