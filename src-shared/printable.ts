/** What the command line, the workers' logs and the dashboard show of text they did not write themselves. */

/**
 * Characters that draw nothing, or rearrange the text around them: the C0 and C1 controls (a
 * newline, a tab, an escape), the bidi marks, embeddings, overrides and isolates (U+202E draws
 * `/tmp/\u202etxt.exe` as `/tmp/exe.txt`), zero-width spaces and the byte order mark. A name, a
 * path or a message from whoever submits, claims or runs a job may hold any of them.
 */
export const INVISIBLE_CHARS = /[\u0000-\u001f\u007f-\u009f\u061c\u200b\u200e\u200f\u202a-\u202e\u2060\u2066-\u2069\ufeff]/g

/** An invisible character as Leasehold writes it everywhere: `\u202e`, `\u000a`. */
export const escapedChar = (char: string): string => `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`

/**
 * Text as an operator's terminal should show it: every invisible character written as its escape
 * (`\u001b`, `\u202e`). Job types, ids, notes, errors and the output of the programs jobs run
 * come from whoever submits, claims or runs a job: an escape sequence would recolour or rewrite
 * the terminal, a newline or tab break a table or forge a line of a log, and a bidi override
 * would draw a path or a name reversed (`exe.txt` for `txt.exe`). Every string of the host's a
 * command prints, and every line a handler logs, goes through it.
 */
export function printable(text: string): string {
  return text.replace(INVISIBLE_CHARS, escapedChar)
}
