/** What an inline confirmation does when it is left without an answer. */
export interface ConfirmationOptions {
  /** The safe choice (keep, close): what Escape does. */
  cancel: () => void
  /**
   * Where focus goes back to when what opened the question is no longer on the page as it goes:
   * a button the question took the place of (a schedule's Delete), drawn again in its place.
   */
  returnTo?: () => HTMLElement | null | undefined
}

/**
 * A Svelte action for an inline confirmation (`role="alertdialog"`): as it appears, focus moves
 * to its safe choice (the button marked `data-safe`), so that a keyboard or a screen reader is
 * in the question at once and Enter cannot take the dangerous answer by accident; Tab and
 * Shift+Tab go round its buttons, never out of it, while it is open; Escape takes the safe
 * choice; and once it goes, focus returns to what opened it, or to `returnTo` when that
 * went (where focus would otherwise fall to the page itself).
 */
export function confirmation(node: HTMLElement, options: ConfirmationOptions) {
  let current = options
  const opener = document.activeElement instanceof HTMLElement && document.activeElement !== document.body ? document.activeElement : null
  node.querySelector<HTMLElement>('[data-safe]')?.focus()
  const onKey = (event: KeyboardEvent) => {
    if (event.key === 'Tab') return keepTabInside(node, event)
    if (event.key !== 'Escape') return
    event.preventDefault()
    current.cancel()
  }
  node.addEventListener('keydown', onKey)
  return {
    update(next: ConfirmationOptions) {
      current = next
    },
    destroy() {
      node.removeEventListener('keydown', onKey)
      // Only where focus was in the question (or fell out of the page with it): never taken from where the operator moved it.
      const active = document.activeElement
      if (active !== null && active !== document.body && !node.contains(active)) return
      // Looked for once the page is updated: a button the question replaced is drawn again then.
      queueMicrotask(() => (opener?.isConnected ? opener : current.returnTo?.())?.focus())
    },
  }
}

/** What Tab stops at in a question: its buttons (and any field or link), those that are not off. */
const CONTROLS = 'button:not([disabled]), input:not([disabled]), select:not([disabled]), textarea:not([disabled]), a[href]'

/**
 * Tab on a question's last control goes to its first, Shift+Tab on its first to its last: a
 * question is answered (or Escape pressed) before the keyboard leaves it, as in a dialog.
 */
function keepTabInside(node: HTMLElement, event: KeyboardEvent): void {
  const controls = [...node.querySelectorAll<HTMLElement>(CONTROLS)]
  const [first, last] = [controls[0], controls.at(-1)]
  if (!first || !last || document.activeElement !== (event.shiftKey ? first : last)) return
  event.preventDefault()
  ;(event.shiftKey ? last : first).focus()
}
