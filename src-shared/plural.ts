/** "1 unit", "40 units": a count and its word, the word in the plural unless the count is 1. */
export function counted(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`
}
