/**
 * `npm run bench` is how the speed targets are checked, and only a full run used to show that a
 * change had broken it (the eighth session's grant-latency rows stopped with "lease denied").
 * Its quick engine figures run here: the run ends, and every row it prints holds a number. No
 * figure is compared with anything: tests check behaviour, not timings.
 */
import { execFile } from 'node:child_process'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { expect, test } from 'vitest'
import { PROJECT_ROOT } from '../../scripts/cli-bundle.js'

const run = promisify(execFile)

test('`npm run bench -- --quick --only=engine --json` runs to the end, and every row it prints holds a number', async () => {
  const tsx = join(PROJECT_ROOT, 'node_modules', 'tsx', 'dist', 'cli.mjs')
  const { stdout } = await run(process.execPath, [tsx, join(PROJECT_ROOT, 'scripts', 'bench.ts'), '--quick', '--only=engine', '--json'], {
    cwd: PROJECT_ROOT,
    maxBuffer: 16 * 1024 * 1024,
  })
  const report = JSON.parse(stdout) as { mode: string; rows: { name: string; value: number; unit: string }[] }
  expect(report.mode).toBe('quick')
  const broken = report.rows.filter((row) => typeof row.value !== 'number' || !Number.isFinite(row.value))
  expect(broken).toEqual([])
  // Rows issue 11 names, among the engine's own.
  expect(report.rows.map((row) => row.name)).toEqual(
    expect.arrayContaining(['engine lifecycle (normal)', 'pages per job', 'engine concurrent, 32 workers (normal)']),
  )
})
