import { describe, expect, test } from 'vitest'
import { childEnvironment, chooseLaunch, isQuitMessage, QUIT_MESSAGE, RETRY_DOWNLOAD, stopStep, whenAlreadyRunning } from '../../src-main/desktop/launch'
import type { SandboxProblem } from '../../src-main/desktop/sandbox'

const ELECTRON = { path: '/app/node_modules/electron/dist/electron' }
const SANDBOX: SandboxProblem = { summary: "Electron's sandbox cannot start: …", remedy: ['Fix it one of these ways, then run npm start again:', '  1. …'] }

describe('chooseLaunch', () => {
  test('Electron, its sandbox and the native build all there: the desktop app, silently', () => {
    expect(chooseLaunch({ electron: ELECTRON, sandbox: null, native: { ok: true } })).toEqual({ run: 'electron', notice: [] })
  })

  test('a skipped or failed download: the headless host, and the command that retries it', () => {
    const launch = chooseLaunch({ electron: { missing: 'binary' }, sandbox: null, native: null })
    expect(launch.run).toBe('headless')
    expect(launch.notice).toEqual([
      `leasehold: the Electron binary is not installed (its download was skipped or failed); starting the headless host (leasehold serve) instead. To get the window: ${RETRY_DOWNLOAD}, then npm start.`,
    ])
  })

  test('no electron package at all (--omit=dev): the headless host, saying so', () => {
    const launch = chooseLaunch({ electron: { missing: 'package' }, sandbox: null, native: null })
    expect(launch).toEqual({ run: 'headless', notice: ['leasehold: the electron package is not installed (npm install --omit=dev leaves it out); starting the headless host (leasehold serve) instead.'] })
  })

  test('a sandbox that would abort Electron: the headless host, with the remedy', () => {
    const launch = chooseLaunch({ electron: ELECTRON, sandbox: SANDBOX, native: null })
    expect(launch.run).toBe('headless')
    expect(launch.notice).toEqual([
      "leasehold: Electron's sandbox cannot start: … Until it is fixed, starting the headless host (leasehold serve) instead.",
      ...SANDBOX.remedy,
    ])
  })

  test('a failed native build: the headless host, with one line that says why', () => {
    const launch = chooseLaunch({ electron: ELECTRON, sandbox: null, native: { ok: false, reason: 'no prebuilt better-sqlite3 … and compiling it failed' } })
    expect(launch.run).toBe('headless')
    expect(launch.notice).toHaveLength(1)
    expect(launch.notice[0]).toBe(
      'leasehold: the desktop app cannot open its database: no prebuilt better-sqlite3 … and compiling it failed; starting the headless host (leasehold serve) instead. (README, "Desktop app": what building it needs.)',
    )
  })
})

describe('whenAlreadyRunning', () => {
  const running = { url: 'http://127.0.0.1:7878', pid: 4242 }

  test('with Electron ready: its window, without rebuilding out/', () => {
    expect(whenAlreadyRunning(running, true)).toEqual({
      run: 'electron',
      notice: ['leasehold: a Leasehold host is already running at http://127.0.0.1:7878 (pid 4242); out/ is not rebuilt under it. Showing its window.'],
    })
  })

  test('without Electron: where its dashboard is, and nothing started', () => {
    expect(whenAlreadyRunning(running, false)).toEqual({
      run: 'nothing',
      notice: ['leasehold: a Leasehold host is already running at http://127.0.0.1:7878 (pid 4242); out/ is not rebuilt under it. Its dashboard is at http://127.0.0.1:7878/ (stop it first to start another).'],
    })
  })
})

describe('childEnvironment', () => {
  test('ELECTRON_RUN_AS_NODE is removed, everything else kept', () => {
    const env = { PATH: '/usr/bin', ELECTRON_RUN_AS_NODE: '1', LEASEHOLD_PORT: '9000' }
    expect(childEnvironment(env)).toEqual({ PATH: '/usr/bin', LEASEHOLD_PORT: '9000' })
    expect(env.ELECTRON_RUN_AS_NODE).toBe('1') // the parent's own environment is left alone
  })
})

describe('stopStep', () => {
  const electron = { child: 'electron' as const, channel: true, signal: 'SIGINT' as const }
  const headless = { child: 'headless' as const, channel: false, signal: 'SIGINT' as const }

  test('Ctrl-C asks Electron to quit cleanly over IPC on every platform, Windows included', () => {
    for (const platform of ['win32', 'linux', 'darwin'] as const) expect(stopStep(1, { ...electron, platform })).toEqual({ kind: 'message' })
  })

  test('without the IPC channel: the signal on POSIX; on Windows there is no gentle way', () => {
    expect(stopStep(1, { ...electron, channel: false, platform: 'linux' })).toEqual({ kind: 'signal', signal: 'SIGINT' })
    expect(stopStep(1, { ...electron, channel: false, platform: 'win32' })).toEqual({ kind: 'kill' })
  })

  test('the headless host gets the signal on POSIX, and on Windows has its own Ctrl-C already', () => {
    expect(stopStep(1, { ...headless, platform: 'linux', signal: 'SIGTERM' })).toEqual({ kind: 'signal', signal: 'SIGTERM' })
    expect(stopStep(1, { ...headless, platform: 'win32' })).toEqual({ kind: 'none' })
  })

  test('a second interrupt stops the child at once', () => {
    expect(stopStep(2, { ...electron, platform: 'win32' })).toEqual({ kind: 'kill' })
    expect(stopStep(2, { ...headless, platform: 'linux' })).toEqual({ kind: 'kill' })
  })

  test('the quit message is recognised, nothing else is', () => {
    expect(isQuitMessage(QUIT_MESSAGE)).toBe(true)
    expect(isQuitMessage({ ...QUIT_MESSAGE })).toBe(true)
    expect(isQuitMessage({ type: 'quit' })).toBe(false)
    expect(isQuitMessage('leasehold:quit')).toBe(false)
    expect(isQuitMessage(null)).toBe(false)
  })
})
