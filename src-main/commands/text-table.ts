import { printable } from '../../src-shared/printable'

/** The client commands' tables as a terminal shows them: cells padded to their width on screen, written safe to print. */

/** Pads columns to their widest cell (each written {@link printable}) as a terminal shows them ({@link displayWidth}); the last column is not padded. */
export function table(header: string[], rows: string[][]): string {
  const all = [header, ...rows.map((row) => row.map(printable))]
  const widths = header.map((_, i) => Math.max(...all.map((row) => displayWidth(row[i] ?? ''))))
  return all.map((row) => row.map((cell, i) => (i === row.length - 1 ? cell : cell + ' '.repeat(widths[i]! - displayWidth(cell)))).join('  ')).join('\n')
}

/** Marks drawn over the character before them, and the zero-width characters: no column of their own. */
const ZERO_WIDTH = /^[\p{Mn}\p{Me}\u200b-\u200f\u2060\ufeff]$/u
/** Characters a terminal draws two columns wide: East Asian Wide and Fullwidth (Unicode's UAX #11), and emoji shown as such. */
const DOUBLE_WIDTH = /^[\u1100-\u115f\u2e80-\u303e\u3041-\u33ff\u3400-\u4dbf\u4e00-\u9fff\ua000-\ua4cf\uac00-\ud7a3\uf900-\ufaff\ufe30-\ufe4f\uff00-\uff60\uffe0-\uffe6\u{20000}-\u{3fffd}\p{Emoji_Presentation}]$/u

/**
 * The columns `text` takes on a terminal: a string's length counts UTF-16 code units, so a
 * column of キュー (three code units, six columns) or of an emoji (two, two) would be padded
 * short, and every column after it pushed out of line.
 */
export function displayWidth(text: string): number {
  let width = 0
  for (const char of text) width += ZERO_WIDTH.test(char) ? 0 : DOUBLE_WIDTH.test(char) ? 2 : 1
  return width
}
