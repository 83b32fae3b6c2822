/**
 * Smoke test of the desktop app, started as `npm start` starts it: out/ built by electron-vite,
 * better-sqlite3 built for Electron (scripts/rebuild-native.js), and Electron given the package
 * root as its app path, so `app.getAppPath()` finds drizzle/ and out/native where the app looks.
 * The window must show capacity, and follow a change made through the API: live data, not a
 * page that merely loaded. Needs the Electron binary (npm's electron package downloads it at
 * install); where it is missing — ELECTRON_SKIP_BINARY_DOWNLOAD, a machine that cannot fetch it,
 * such as the ones this project is built on — the test is skipped and says why.
 */
import { execFileSync } from 'node:child_process'
import { existsSync, readFileSync, rmSync } from 'node:fs'
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

test('the Electron window opens on its own host and its dashboard shows live capacity', async (context) => {
  const electron = electronBinary()
  if ('missing' in electron) {
    context.skip(`skipped: ${electron.missing}`)
    return
  }
  // What `npm start` does before it launches Electron (scripts/start.js).
  execFileSync(process.execPath, [join(ROOT, 'node_modules/electron-vite/bin/electron-vite.js'), 'build'], { cwd: ROOT, stdio: 'pipe', timeout: 180_000 })
  execFileSync(process.execPath, [join(ROOT, 'scripts/rebuild-native.js')], { cwd: ROOT, stdio: 'pipe', timeout: 300_000 })
  const dataDir = tempDir('leasehold-electron-')
  const env = { ...process.env, LEASEHOLD_WORKERS: '0', LEASEHOLD_BUSY: '0' } as Record<string, string>
  delete env['ELECTRON_RUN_AS_NODE']
  const app = await _electron.launch({
    executablePath: electron.path,
    // The package root, as `electron .` in start.js; Leasehold's flags beside Chromium's switches.
    // --no-sandbox: CI containers have no usable sandbox; the user's app never gets it added.
    args: [ROOT, '--no-sandbox', '--disable-gpu', '--port', '0', `--data-dir=${dataDir}`],
    cwd: ROOT,
    env,
    timeout: 60_000,
  })
  try {
    const window = await app.firstWindow()
    const total = window.getByTestId('cap-total')
    await total.waitFor({ timeout: 30_000 })
    expect(Number(await total.textContent())).toBeGreaterThan(0)

    // The host the app started on --data-dir, found as the CLI finds it.
    const { url } = JSON.parse(readFileSync(join(dataDir, 'host.json'), 'utf8')) as { url: string }
    const token = readFileSync(join(dataDir, 'token'), 'utf8').trim()
    const changed = await fetch(`${url}/api/capacity`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ total_units: 37 }),
    })
    expect(changed.status).toBe(200)
    await expect.poll(async () => (await total.textContent())?.trim(), { timeout: 15_000 }).toBe('37')

    // The page never holds the token: the preload hands over the API's base URL only.
    expect(await window.evaluate(() => JSON.stringify((window as unknown as { leasehold?: unknown }).leasehold))).toBe(JSON.stringify({ apiBase: url }))
  } finally {
    await app.close()
    rmSync(dataDir, { recursive: true, force: true })
  }
}, 600_000)
