/** What the command line and the workers' logs print of text they did not write themselves. */

/**
 * Text as an operator's terminal should show it: control characters (C0, DEL, C1) written as
 * `\u001b`. Job types, ids, notes, errors and the output of the programs jobs run come from
 * whoever submits, claims or runs a job, and an escape sequence would recolour or rewrite the
 * terminal, a newline or tab break a table or forge a line of a log. Every string of the host's
 * a command prints, and every line a handler logs, goes through it.
 */
export function printable(text: string): string {
  return text.replace(/[\u0000-\u001f\u007f-\u009f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)
}
