/**
 * BullMQ's figures, the yardstick of the bench's ratio rows (scripts/peer-bench/): either read
 * from the JSON line `scripts/peer-bench/run.sh` printed before the run (`--peer=FILE`), or
 * measured during the run, right before and right after each row they are compared with
 * (`--peer=live`). On a shared machine the speed moves by a third within minutes, so a ratio of
 * two figures taken minutes apart reads that as much as the code; read beside its row, BullMQ's
 * figure meets the same minute of the machine.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'

/** BullMQ's figures a ratio row is compared with (peer-bullmq.mjs `--serve` names them so). */
export type PeerFigure = 'process' | 'single' | 'single1' | 'add' | 'pickup' | 'one'

/** What the bench reads of peer-bench's JSON line. */
interface PeerLine {
  processing: { concurrency: number; jobs_per_s: number }[]
  latency: { concurrency: number; pickup_ms: { p50: number } }[]
  /** Jobs added one add() each by 16 producers, processed at concurrency 8. */
  processing_single?: { jobs_per_s: number }
  /** The same from one producer, each add() once the last returned: one client's shape, its jobs processed. */
  processing_single_one?: { jobs_per_s: number }
  /** Jobs added one at a time, each once the last one completed and a pause passed: add → processor start. */
  pickup_one_at_a_time?: { pickup_ms: { p50: number } }
  /** add() awaited one after another. */
  enqueue?: { add?: { jobs_per_s: number } }
}

/** One of BullMQ's figures for one row, and how it was read (for the row's note). */
export interface PeerReading {
  value: number
  /** "" for a figure from the file; "read before and after it: 6,012 and 6,380" for a live one. */
  how: string
}

/**
 * Runs a row's measure. With a live peer, BullMQ's `figures` are read right before and right
 * after it, and kept as the row's; otherwise it only runs the measure.
 */
export type Beside = <T>(row: string, figures: readonly PeerFigure[], measure: () => Promise<T>) => Promise<T>

export const ALONE: Beside = (_row, _figures, measure) => measure()

export interface Peer {
  /** Runs each ratio row's measure (see {@link Beside}). */
  beside: Beside
  /** BullMQ's `figure` to compare `row` with; undefined when it was not measured. */
  figure(row: string, figure: PeerFigure): PeerReading | undefined
  stop(): Promise<void>
}

/** The peer from the JSON line `scripts/peer-bench/run.sh` printed (the file's last line). */
export function peerFromFile(file: string): Peer {
  const lines = readFileSync(file, 'utf8').trim().split('\n')
  const line = JSON.parse(lines[lines.length - 1]!) as PeerLine
  const figures: Record<PeerFigure, number | undefined> = {
    process: line.processing?.find((x) => x.concurrency === 8)?.jobs_per_s,
    single: line.processing_single?.jobs_per_s,
    single1: line.processing_single_one?.jobs_per_s,
    add: line.enqueue?.add?.jobs_per_s,
    pickup: line.latency?.find((x) => x.concurrency === 8)?.pickup_ms.p50,
    one: line.pickup_one_at_a_time?.pickup_ms.p50,
  }
  return {
    beside: ALONE,
    figure: (_row, figure) => (figures[figure] === undefined ? undefined : { value: figures[figure]!, how: '' }),
    stop: async () => {},
  }
}

const RUN_SH = fileURLToPath(new URL('../peer-bench/run.sh', import.meta.url))
/** Its first run installs its packages (npm ci) and then warms up by running every figure once. */
const READY_TIMEOUT_MS = 300_000

const n = (value: number) => (value >= 100 ? Math.round(value).toLocaleString('en-US') : String(value))

/**
 * BullMQ measured during the run: `scripts/peer-bench/run.sh serve` (its own redis-server, as
 * for the file) answers one figure a request. `env` sets its counts (peer-bullmq.mjs's header).
 */
export async function startLivePeer(env: Record<string, string> = {}): Promise<Peer> {
  const child = spawn('bash', [RUN_SH, 'serve'], { stdio: ['pipe', 'pipe', 'pipe'], env: { ...process.env, ...env } })
  // Its last lines on stderr, for the reason if it ends early.
  const errors: string[] = []
  child.stderr!.on('data', (chunk: Buffer) => {
    errors.push(...chunk.toString().trim().split('\n'))
    errors.splice(0, errors.length - 5)
  })
  const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]()
  const ended = new Promise<never>((_resolve, reject) =>
    child.once('close', (code) => reject(new Error(`the BullMQ peer ended (exit ${code}): ${errors.join(' / ') || 'no message'}`))),
  )
  ended.catch(() => {})
  const nextLine = async (timeoutMs: number): Promise<string> => {
    let timer: NodeJS.Timeout | undefined
    const timeout = new Promise<never>((_resolve, reject) => {
      timer = setTimeout(() => reject(new Error(`the BullMQ peer did not answer within ${timeoutMs / 1000} s`)), timeoutMs)
    })
    try {
      const next = await Promise.race([lines.next(), ended, timeout])
      if (next.done) return await ended
      return next.value
    } finally {
      clearTimeout(timer)
    }
  }
  try {
    const ready = await nextLine(READY_TIMEOUT_MS)
    if (ready !== 'ready') throw new Error(`the BullMQ peer said "${ready}" instead of ready`)
  } catch (error) {
    stopPeer(child)
    throw error
  }

  const measure = async (figure: PeerFigure): Promise<number> => {
    child.stdin!.write(`${figure}\n`)
    const answer = JSON.parse(await nextLine(READY_TIMEOUT_MS)) as { figure: string; value?: number; error?: string }
    if (answer.value === undefined) throw new Error(`the BullMQ peer could not measure ${figure}: ${answer.error}`)
    return answer.value
  }
  const readings = new Map<string, Map<PeerFigure, number[]>>()
  const read = async (row: string, figures: readonly PeerFigure[]): Promise<void> => {
    const ofRow = readings.get(row) ?? new Map<PeerFigure, number[]>()
    readings.set(row, ofRow)
    for (const figure of figures) ofRow.set(figure, [...(ofRow.get(figure) ?? []), await measure(figure)])
  }
  return {
    beside: async (row, figures, run) => {
      await read(row, figures)
      const result = await run()
      await read(row, [...figures].reverse())
      return result
    },
    figure: (row, figure) => {
      const values = readings.get(row)?.get(figure)
      if (!values?.length) return undefined
      const mean = values.reduce((a, b) => a + b, 0) / values.length
      return { value: mean >= 100 ? Math.round(mean) : +mean.toFixed(3), how: `read before and after it: ${values.map(n).join(' and ')}` }
    },
    stop: async () => {
      child.stdin!.end()
      await Promise.race([ended.catch(() => {}), new Promise((resolve) => setTimeout(resolve, 10_000).unref())])
      stopPeer(child)
    },
  }
}

/** Ends the peer and, through run.sh's trap, its redis-server. */
function stopPeer(child: ChildProcess): void {
  if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM')
}
