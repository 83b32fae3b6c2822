import { connect } from 'node:net'

/** One command Redis ran, as MONITOR shows it: its arguments and who sent it (`ip:port`, or `lua` for a script's own). */
interface SeenCommand {
  args: string[]
  source: string
}

/**
 * Every command the Redis on `port` runs from the moment this resolves until `stop` (those
 * `keep` takes), each as its arguments.
 *
 * A socket of its own, not ioredis's `monitor()`: ioredis enters its monitoring state one
 * microtask after MONITOR's OK, and a command line that arrives in the same read as the OK
 * finds an empty command queue and ends the connection with "Command queue state error".
 */
export function watchRedis(port: number, keep: (seen: SeenCommand) => boolean = () => true): Promise<{ commands: string[][]; stop(): void }> {
  const socket = connect(port, '127.0.0.1')
  const commands: string[][] = []
  let buffered = ''
  return new Promise((resolve, reject) => {
    socket.once('error', reject)
    socket.on('connect', () => socket.write('MONITOR\r\n'))
    socket.on('data', (chunk: Buffer) => {
      buffered += chunk.toString('latin1')
      let end: number
      while ((end = buffered.indexOf('\r\n')) >= 0) {
        const line = buffered.slice(0, end)
        buffered = buffered.slice(end + 2)
        if (line === '+OK') resolve({ commands, stop: () => socket.destroy() })
        else if (line.startsWith('-')) reject(new Error(`MONITOR refused: ${line.slice(1)}`))
        else {
          const seen = monitorLine(line)
          if (seen && keep(seen)) commands.push(seen.args)
        }
      }
    })
  })
}

/** `+1339518083.107412 [0 127.0.0.1:60866] "keys" "*"` → its arguments (unescaped) and source. */
function monitorLine(line: string): SeenCommand | null {
  const head = /^\+\d+\.\d+ \[\d+ ([^\]]+)\] /.exec(line)
  if (!head) return null
  const args = [...line.slice(head[0].length).matchAll(/"((?:[^"\\]|\\.)*)"/g)].map(([, quoted]) => unescape(quoted!))
  return { args, source: head[1]! }
}

const ESCAPES: Record<string, string> = { n: '\n', r: '\r', t: '\t', a: '\x07', b: '\b', '"': '"', '\\': '\\' }

/** Undoes Redis's sdscatrepr quoting: `\n`, `\"`, `\\` and the like, and `\xHH` for other bytes. */
function unescape(quoted: string): string {
  const bytes = quoted.replace(/\\x([0-9a-f]{2})|\\(.)/g, (_, hex: string | undefined, char: string) =>
    hex ? String.fromCharCode(parseInt(hex, 16)) : (ESCAPES[char] ?? char),
  )
  return Buffer.from(bytes, 'latin1').toString('utf8')
}
