/**
 * A queue is a segment of the operators' paths (/api/queues/QUEUE/pause), and URL parsers drop a
 * segment "." or ".." (spelt %2E too): a queue so named could be filled but never paused or
 * resumed, so no queue may be named so. Plain code, not a schema: the client commands check it
 * without loading zod (test/cli/bundle.test.ts).
 */
export const isDotSegment = (name: string): boolean => name === '.' || name === '..'

export const DOT_SEGMENT_REFUSAL = 'cannot be "." or ".." (a URL path drops such a segment)'
