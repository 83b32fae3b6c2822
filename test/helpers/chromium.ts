import { execFileSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { type Browser, chromium } from 'playwright-core'

/** Debian's Chromium, which the browser tests drive (never a browser Playwright downloads). */
export const CHROMIUM = '/usr/bin/chromium'

const ROOT = join(import.meta.dirname, '../..')

/** Where the built renderer is, which a test host serves. */
export const RENDERER_DIR = join(ROOT, 'out/renderer')

// Skipped only on a developer machine without Debian's Chromium; CI installs it (.ci/run), and
// there a missing browser fails the run rather than skipping the browser tests.
if (process.env.CI && !existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: .ci/run installs Debian's chromium`)

/** Whether the browser tests can run here. */
export const hasChromium = (): boolean => existsSync(CHROMIUM)

/** Builds the renderer from the sources under test, for a test host to serve. */
export function buildRenderer(): void {
  execFileSync('npx', ['electron-vite', 'build'], { cwd: ROOT, stdio: 'pipe', timeout: 120_000 })
}

/** Debian's Chromium, headless, without the background traffic and first-run work a test has no use for. */
export const launchChromium = (): Promise<Browser> =>
  chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
  })
