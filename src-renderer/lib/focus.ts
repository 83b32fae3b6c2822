/**
 * Where keyboard focus goes when what held it leaves the page: a button that disappears (a
 * blocker's Retry, once answered) or turns disabled (New schedule, once its form is open) drops
 * focus to the page itself, and a keyboard user starts again from the top.
 */

/** Whether focus has fallen out of the page's elements (to the page itself, or nowhere). */
const focusLost = (): boolean => document.activeElement === null || document.activeElement === document.body

/** A Svelte action for a form: as it appears, focus moves to its first field that takes input. */
export function focusFirstField(node: HTMLElement): void {
  node.querySelector<HTMLElement>('input:not([disabled]), select:not([disabled]), textarea:not([disabled])')?.focus()
}

/**
 * A Svelte action for what replaces a focused element that went (a resolved blocker's answer, in
 * place of the buttons that gave it): while `take` holds, it takes focus if focus fell out of the
 * page, never from where the operator moved it. The node needs `tabindex="-1"`.
 */
export function takeLostFocus(node: HTMLElement, take: boolean) {
  const maybe = (now: boolean) => {
    if (now && focusLost()) node.focus()
  }
  maybe(take)
  return { update: maybe }
}

/** Gives `node` the focus if focus fell out of the page (what held it went: a form that closed). */
export function focusIfLost(node: HTMLElement | undefined): void {
  if (node && focusLost()) node.focus()
}
