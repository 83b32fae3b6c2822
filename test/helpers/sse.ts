/** One frame of a server-sent event stream: its id, its event name and its data, as sent. */
export interface SseMessage {
  id?: string
  event?: string
  data?: string
}

/**
 * Reads the frames of a streaming response (`text/event-stream`) as they come, keeping all seen
 * so far; comments (`: ping`) and frames without an event name are skipped.
 */
export class SseReader {
  readonly messages: SseMessage[] = []
  /** Whether the host ended the stream (not a timeout or {@link SseReader.close}). */
  endedByHost = false
  private readonly reader: ReadableStreamDefaultReader<Uint8Array>
  private readonly decoder = new TextDecoder()
  private buffer = ''
  private done = false

  constructor(res: Response) {
    this.reader = res.body!.getReader()
  }

  /** Reads until `until` holds for the frames seen so far, the stream ends, or `timeoutMs` passes; answers the frames. */
  async until(until: (messages: SseMessage[]) => boolean, timeoutMs = 5000): Promise<SseMessage[]> {
    let timedOut = false
    const deadline = setTimeout(() => {
      timedOut = true
      void this.close()
    }, timeoutMs)
    try {
      while (!until(this.messages) && !this.done && !timedOut) {
        const { done, value } = await this.reader.read()
        if (done) {
          this.endedByHost = !this.done // close() (a timeout's too) marks it done before the read ends
          this.done = true
          break
        }
        this.take(this.decoder.decode(value, { stream: true }))
      }
    } finally {
      clearTimeout(deadline)
    }
    return this.messages
  }

  async close(): Promise<void> {
    this.done = true
    await this.reader.cancel().catch(() => {})
  }

  private take(text: string): void {
    this.buffer += text
    let end: number
    while ((end = this.buffer.indexOf('\n\n')) >= 0) {
      const block = this.buffer.slice(0, end)
      this.buffer = this.buffer.slice(end + 2)
      const message: SseMessage = {}
      for (const line of block.split('\n')) {
        const [key, ...rest] = line.split(': ')
        if (key === 'id' || key === 'event' || key === 'data') message[key] = rest.join(': ')
      }
      if (message.event) this.messages.push(message)
    }
  }
}

/** Reads the frames of `res` until `until` holds (or `timeoutMs` passes), then closes it. */
export async function readEvents(res: Response, until: (messages: SseMessage[]) => boolean, timeoutMs = 5000): Promise<SseMessage[]> {
  const reader = new SseReader(res)
  try {
    return await reader.until(until, timeoutMs)
  } finally {
    await reader.close()
  }
}
