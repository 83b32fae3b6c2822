/**
 * How long a host takes from spawn to listening on a data dir that holds a million finished
 * jobs, with every row a real run leaves (the job, its lease, its four events): what a desktop
 * app waits for when it opens. The open reads the header and the schema, not every page (the
 * integrity check runs in the background, and only after an unclean shutdown), so the figure
 * does not grow with the file. Each start follows a clean stop, as an app's daily start does.
 */
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { fileURLToPath } from 'node:url'
import { buildCliBundle } from '../cli-bundle.js'
import { openDatabase } from '../../src-main/db/open'
import { ACTIVE_FROM_KEY } from '../../src-main/engine/memory/active-leases'
import { QUEUED_FROM_KEY } from '../../src-main/engine/memory/job-tally'
import { percentile, T0, type Row } from './lib'
import { insertFinished } from './measure'

const BIN = fileURLToPath(new URL('../../bin/leasehold.js', import.meta.url))
/** Starts measured; the median is the figure (a start is short, and the machine is shared). */
const STARTS = 5
const TARGET_MS = 1000

/** Spawns `leasehold serve`, resolves with the ms until its listening line, then stops it with SIGTERM (a clean stop). */
async function timeOneStart(dataDir: string): Promise<number> {
  const started = performance.now()
  const child = spawn(process.execPath, [BIN, 'serve', '--data-dir', dataDir, '--port', '0', '--workers', '0', '--busy', '0'], { stdio: ['ignore', 'pipe', 'pipe'] })
  let stderr = ''
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve))
  try {
    return await new Promise<number>((resolve, reject) => {
      let stdout = ''
      child.stdout!.on('data', (chunk: Buffer) => {
        stdout += chunk.toString()
        if (stdout.includes('leasehold listening on')) resolve(performance.now() - started)
      })
      void exited.then((code) => reject(new Error(`the host exited with ${code} before listening: ${stderr.trim()}`)))
    })
  } finally {
    child.kill('SIGTERM')
    await exited
  }
}

/** The row `host start, N finished jobs`: the median of {@link STARTS} starts against its target. */
export async function measureHostStart(finished: number, progress: (m: string) => void): Promise<Row[]> {
  const n = finished.toLocaleString('en-US')
  const dataDir = mkdtempSync(join(tmpdir(), 'leasehold-bench-start-'))
  try {
    await buildCliBundle() // the bundle starts as the installed command does, not through tsx
    progress(`host start: writing ${n} finished jobs with their leases and events`)
    const { sqlite } = openDatabase({ path: join(dataDir, 'leasehold.db') })
    insertFinished(sqlite, finished, T0, { lifecycle: true })
    // As a real run leaves it: the floor of the ACTIVE leases' fences is stored with each block of
    // fences reserved (engine/store/counters.ts), and none of these leases is ACTIVE.
    sqlite.prepare('INSERT OR REPLACE INTO settings (key, value) VALUES (?, ?)').run(ACTIVE_FROM_KEY, String(finished))
    // Likewise the floor of the QUEUED jobs' seqs, stored with each block of job seqs reserved
    // (4,096): none is QUEUED, so it is the first seq of the last block, and a start reads that block.
    sqlite.prepare('INSERT OR REPLACE INTO settings (key, value) VALUES (?, ?)').run(QUEUED_FROM_KEY, String(Math.max(1, finished - 4095)))
    sqlite.close()
    await timeOneStart(dataDir) // the first start after the fill migrates nothing but warms the page cache, as any later start finds it
    const times: number[] = []
    for (let i = 0; i < STARTS; i++) times.push(await timeOneStart(dataDir))
    const ms = percentile(times, 50)
    progress(`host start: ${times.map((t) => t.toFixed(0)).join(', ')} ms`)
    return [
      {
        name: `host start, ${n} finished jobs`,
        value: ms,
        unit: 'ms',
        target: `≤ ${TARGET_MS}`,
        status: ms <= TARGET_MS ? 'PASS' : 'MISS',
        note: `spawn → listening, median of ${STARTS} starts after a clean stop; every row a run leaves (job, lease, events)`,
      },
    ]
  } finally {
    rmSync(dataDir, { recursive: true, force: true })
  }
}
