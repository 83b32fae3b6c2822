/** What the command line prints of text it did not write itself. */

/**
 * Text as the terminal should show it: control characters (C0, DEL, C1) written as `\u001b`.
 * Job types, add-on and worker ids, notes and errors come from whoever submits, claims or runs a
 * job, and an escape sequence would recolour or rewrite the operator's terminal, a newline or tab
 * break a table or forge a line. Every string of the host's a command prints goes through it.
 */
export function printable(text: string): string {
  return text.replace(/[\u0000-\u001f\u007f-\u009f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)
}
