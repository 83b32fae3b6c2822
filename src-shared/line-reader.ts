/**
 * Cuts a stream of text into lines and calls `onLine` with each whole one, without its "\n":
 * `push` each chunk as it comes, and `end` once the stream has ended (a last line with no "\n"
 * goes then). Used for the threads' links (thread-link.ts), the worker processes' output and
 * the `exec` handler's. `push` returns false, and takes nothing more, once a line grows past
 * `maxChars` without ending.
 */
export function lineReader(onLine: (line: string) => void, maxChars = Number.POSITIVE_INFINITY): { push(chunk: string): boolean; end(): void } {
  let partial = ''
  let broken = false
  return {
    push(chunk) {
      if (broken) return false
      let start = 0
      let end: number
      while ((end = chunk.indexOf('\n', start)) >= 0) {
        const line = partial + chunk.slice(start, end)
        partial = ''
        start = end + 1
        onLine(line)
      }
      partial += chunk.slice(start)
      if (partial.length > maxChars) broken = true
      return !broken
    },
    end() {
      if (!broken && partial) onLine(partial)
      partial = ''
    },
  }
}
