/**
 * Smoke test of the desktop app: Electron opens its window and the dashboard in it shows
 * capacity. Needs the Electron binary (npm's electron package downloads it at install); where
 * it is missing — ELECTRON_SKIP_BINARY_DOWNLOAD, a machine that cannot fetch it — the test is
 * skipped and says why.
 */
import { execFileSync } from 'node:child_process'
import { existsSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { _electron } from 'playwright-core'
import { expect, test } from 'vitest'
import { tempDir } from '../helpers/host'

const ROOT = join(import.meta.dirname, '../..')

/** The Electron binary `require('electron')` names, or why there is none. */
function electronBinary(): { path: string } | { missing: string } {
  try {
    const path = createRequire(import.meta.url)('electron') as string
    return existsSync(path) ? { path } : { missing: `the Electron binary is not installed (require('electron') names ${path}, which does not exist)` }
  } catch (error) {
    return { missing: `the Electron binary is not installed (require('electron') failed: ${(error as Error).message})` }
  }
}

test('the Electron window opens and its dashboard shows capacity', async (context) => {
  const electron = electronBinary()
  if ('missing' in electron) {
    context.skip(`skipped: ${electron.missing}`)
    return
  }
  if (!existsSync(join(ROOT, 'out/main/electron.js'))) execFileSync('npx', ['electron-vite', 'build'], { cwd: ROOT, stdio: 'pipe', timeout: 120_000 })
  const userData = tempDir('leasehold-electron-')
  const app = await _electron.launch({
    executablePath: electron.path,
    args: ['--no-sandbox', '--disable-gpu', `--user-data-dir=${userData}`, join(ROOT, 'out/main/electron.js')],
    env: { ...process.env, LEASEHOLD_PORT: '0', LEASEHOLD_WORKERS: '0', LEASEHOLD_BUSY: '0' } as Record<string, string>,
    timeout: 60_000,
  })
  try {
    const window = await app.firstWindow()
    await window.getByTestId('cap-total').waitFor({ timeout: 30_000 })
    expect(Number(await window.getByTestId('cap-total').textContent())).toBeGreaterThan(0)
  } finally {
    await app.close()
    rmSync(userData, { recursive: true, force: true })
  }
}, 120_000)
