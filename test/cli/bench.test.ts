/**
 * `npm run bench` is how the speed targets are checked, and only a full run used to show that a
 * change had broken it (the grant-latency rows once stopped with "lease denied").
 * Its quick engine, HTTP, batched and single-submit figures run here: each run ends, and every
 * row it prints holds a number. No figure is compared with a target: tests check behaviour, not
 * timings.
 */
import { execFile } from 'node:child_process'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { expect, test } from 'vitest'
import { PROJECT_ROOT } from '../../scripts/cli-bundle.js'
import { EARLY_LOCAL_PICKUP, LOCAL_PICKUP_FLOOR, LOCAL_PICKUP_FLOOR_ONE, OPEN_LOOP_LOCAL_PICKUP, POST_FLOOR_1, POST_FLOOR_16, ROWS_FLOOR_1, ROWS_FLOOR_16, SINGLE_1, SINGLE_16, SUBMIT_COMMAND, SUBMIT_ROUTE_1, SUBMIT_ROUTE_16 } from '../../scripts/bench/http'

const run = promisify(execFile)

type Report = { mode: string; rows: { name: string; value: number; unit: string; note?: string }[] }

/** Runs `npm run bench -- --quick --only=<group> --json`; checks it ends, and that every row holds a number. */
async function quickBench(group: string, ...flags: string[]): Promise<Report> {
  const tsx = join(PROJECT_ROOT, 'node_modules', 'tsx', 'dist', 'cli.mjs')
  const { stdout } = await run(process.execPath, [tsx, join(PROJECT_ROOT, 'scripts', 'bench.ts'), '--quick', `--only=${group}`, '--json', ...flags], {
    cwd: PROJECT_ROOT,
    maxBuffer: 16 * 1024 * 1024,
  })
  const report = JSON.parse(stdout) as Report
  expect(report.mode).toBe('quick')
  const broken = report.rows.filter((row) => typeof row.value !== 'number' || !Number.isFinite(row.value))
  expect(broken).toEqual([])
  return report
}

test('`npm run bench -- --quick --only=engine --json` runs to the end, and every row it prints holds a number', async () => {
  const report = await quickBench('engine')
  // Rows with targets, among the engine's own.
  expect(report.rows.map((row) => row.name)).toEqual(
    expect.arrayContaining(['engine lifecycle (normal)', 'pages per job', 'engine concurrent, 32 workers (normal)']),
  )
})

test('`npm run bench -- --quick --only=http --json` runs to the end, and reads the worker API lifecycle against the HTTP floor from drives alternated between them', async () => {
  const report = await quickBench('http')
  const ratio = report.rows.find((row) => row.name === 'worker API lifecycle, 8 workers ÷ HTTP floor')
  expect(ratio?.value).toBeGreaterThan(0)
  expect(ratio?.note).toMatch(/alternated: the floor [\d,]+ and [\d,]+ jobs\/s, the host [\d,]+ and [\d,]+$/)
}, 180_000) // ~35 s alone

test('`npm run bench -- --quick --only=batched --json` runs to the end: the drains, and the local pickups and their floor read at the handler’s start', async () => {
  const report = await quickBench('batched')
  const byName = new Map(report.rows.map((row) => [row.name, row]))
  for (const name of ['pool drain (normal)', 'pool drain (full)', 'external workers batched, 8 processes', 'local pickup p50 (submit → handler starts)', EARLY_LOCAL_PICKUP, OPEN_LOOP_LOCAL_PICKUP, LOCAL_PICKUP_FLOOR, LOCAL_PICKUP_FLOOR_ONE]) {
    expect(byName.get(name)?.value, name).toBeGreaterThan(0)
  }
  // Read on one clock across processes: a pickup takes some time, and far less than the run.
  for (const name of [EARLY_LOCAL_PICKUP, OPEN_LOOP_LOCAL_PICKUP, LOCAL_PICKUP_FLOOR, LOCAL_PICKUP_FLOOR_ONE]) {
    expect(byName.get(name)!.unit, name).toBe('µs')
    expect(byName.get(name)!.value, name).toBeLessThan(10_000_000)
  }
}, 300_000) // ~75 s alone (the Redis rows among them, and 5 s warming each fleet of 8 worker processes); on a busy CI machine more

test('`npm run bench -- --quick --only=single --peer=FILE` drains jobs submitted one request each, from 16 clients and from one, each beside BullMQ’s single adds, the same clients’ ceilings with no job run and their floor with each job’s rows and worker but no engine; and times `leasehold submit` run once a job', async () => {
  // BullMQ's figures as scripts/peer-bench/run.sh prints them (its last line), made up here: only the rows' presence is checked.
  const peer = join(mkdtempSync(join(tmpdir(), 'leasehold-bench-peer-')), 'peer.json')
  writeFileSync(peer, `${JSON.stringify({ processing: [{ concurrency: 8, jobs_per_s: 3000 }], latency: [{ concurrency: 8, pickup_ms: { p50: 0.9 } }], processing_single: { jobs_per_s: 2500 }, processing_single_one: { jobs_per_s: 2000 }, enqueue: { add: { jobs_per_s: 3000 } } })}\n`)
  const report = await quickBench('single', `--peer=${peer}`)
  const byName = new Map(report.rows.map((row) => [row.name, row]))
  for (const name of [SINGLE_16, SINGLE_1, SUBMIT_ROUTE_16, SUBMIT_ROUTE_1, POST_FLOOR_16, POST_FLOOR_1, ROWS_FLOOR_16, ROWS_FLOOR_1, SUBMIT_COMMAND]) {
    expect(byName.get(name)?.value, name).toBeGreaterThan(0)
  }
  for (const name of [SINGLE_16, SINGLE_1]) {
    const ratio = byName.get(`${name} ÷ BullMQ`)
    expect(ratio?.value, `${name} ÷ BullMQ`).toBeGreaterThan(0)
    expect(ratio?.note).toMatch(/with no job run, the submit route alone [\d,]+\/s \([\d.]+ ×\); and a bare Koa app [\d,]+\/s \([\d.]+ ×\); with each job's rows and worker but no engine [\d,]+\/s \([\d.]+ ×\)$/)
  }
  // The one-client row is held to BullMQ's sequential add(), which runs no worker; its note gives BullMQ in the row's own shape too.
  const oneClient = byName.get(`${SINGLE_1} ÷ BullMQ`)!
  const sameShape = /; BullMQ in this row's shape, one producer's adds processed c=8: 2,000 jobs\/s \(([\d.]+) ×\);/.exec(oneClient.note ?? '')
  expect(Number(sameShape?.[1]), oneClient.note).toBeCloseTo(byName.get(SINGLE_1)!.value / 2000, 2)
  expect(byName.get(`${SINGLE_16} ÷ BullMQ`)!.note).not.toMatch(/one producer/)
}, 180_000) // ~35 s alone

test('`npm run bench -- --quick --only=single --peer=live` reads BullMQ’s figure for each single-submit row right before and right after the row itself, from a peer of its own (its own redis-server), which it stops at the end', async () => {
  const report = await quickBench('single', '--peer=live')
  const byName = new Map(report.rows.map((row) => [row.name, row]))
  for (const [name, what] of [[SINGLE_16, 'BullMQ single adds ×16, processed c=8'], [SINGLE_1, 'BullMQ sequential add\\(\\)']] as const) {
    const ratio = byName.get(`${name} ÷ BullMQ`)!
    const [, mean, before, after] = new RegExp(`^${what}: ([\\d,]+) \\(read before and after it: ([\\d,]+) and ([\\d,]+)\\) jobs/s;`).exec(ratio.note ?? '') ?? []
    expect(mean, ratio.note).toBeDefined()
    const figure = (text: string) => Number(text.replaceAll(',', ''))
    // The row's ratio is to the mean of the two readings taken beside it.
    expect(figure(mean!)).toBe(Math.round((figure(before!) + figure(after!)) / 2))
    expect(ratio.value).toBeCloseTo(byName.get(name)!.value / figure(mean!), 6)
  }
  expect(byName.get(`${SINGLE_1} ÷ BullMQ`)!.note).toMatch(/; BullMQ in this row's shape, one producer's adds processed c=8: [\d,]+ \(read before and after it: [\d,]+ and [\d,]+\) jobs\/s \([\d.]+ ×\);/)
  // The peer and its redis-server are gone with the bench.
  const { stdout } = await run('ps', ['-eo', 'args']).catch(() => ({ stdout: '' }))
  expect(stdout).not.toMatch(/peer-bullmq\.mjs --serve/)
}, 300_000) // ~50 s alone, the peer's first run installing its packages (npm ci) more
