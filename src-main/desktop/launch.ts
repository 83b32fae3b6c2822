// What `npm start` (scripts/start.js) decides, as pure functions: which program to run, what to
// tell the user in each case, the child's environment, and how an interrupt stops the child.
// start.js gathers the facts (files, the process table, the native build) and acts on the answers.
import type { HostFile } from '../../src-shared/client-target'
import type { SandboxProblem } from './sandbox'

/** The Electron executable, or why there is none. */
export type ElectronState =
  | { path: string }
  /** `package`: the electron package itself is absent (npm install --omit=dev); `binary`: its download was skipped or failed. */
  | { missing: 'package' | 'binary' }

/** The outcome of scripts/rebuild-native.js. */
export type NativeBuild = { ok: true } | { ok: false; reason: string }

/** What start.js runs, and the lines it prints first (to stderr). */
export interface Launch {
  run: 'electron' | 'headless' | 'nothing'
  notice: string[]
}

/** How to get the binary after a failed or skipped download: Electron's own installer, run by hand. */
export const RETRY_DOWNLOAD = 'node node_modules/electron/install.js'

const HEADLESS = 'starting the headless host (leasehold serve) instead'

/**
 * The desktop app when everything it needs is there, else the headless host with one line that
 * says why (and the sandbox's remedy, which takes a few). `native` is null when the native build
 * was not attempted (no Electron, or a sandbox that would abort it anyway).
 */
export function chooseLaunch(facts: { electron: ElectronState; sandbox: SandboxProblem | null; native: NativeBuild | null }): Launch {
  const { electron, sandbox, native } = facts
  if ('missing' in electron) {
    const line =
      electron.missing === 'package'
        ? `leasehold: the electron package is not installed (npm install --omit=dev leaves it out); ${HEADLESS}.`
        : `leasehold: the Electron binary is not installed (its download was skipped or failed); ${HEADLESS}. To get the window: ${RETRY_DOWNLOAD}, then npm start.`
    return { run: 'headless', notice: [line] }
  }
  if (sandbox) return { run: 'headless', notice: [`leasehold: ${sandbox.summary} Until it is fixed, ${HEADLESS}.`, ...sandbox.remedy] }
  if (native && !native.ok) {
    return {
      run: 'headless',
      notice: [`leasehold: the desktop app cannot open its database: ${native.reason}; ${HEADLESS}. (README, "Desktop app": what building it needs.)`],
    }
  }
  return { run: 'electron', notice: [] }
}

/**
 * A second `npm start` while a host runs on the same data dir: nothing is rebuilt under it. With
 * Electron ready to start (binary, sandbox and an earlier build all there) the app starts
 * without building: if the running host is the app, its single-instance lock shows that window;
 * if it is `leasehold serve`, the app opens a window on it. Otherwise the user is told where it is.
 */
export function whenAlreadyRunning(running: HostFile, electronReady: boolean): Launch {
  const where = `a Leasehold host is already running at ${running.url} (pid ${running.pid}); out/ is not rebuilt under it`
  return electronReady
    ? { run: 'electron', notice: [`leasehold: ${where}. Showing its window.`] }
    : { run: 'nothing', notice: [`leasehold: ${where}. Its dashboard is at ${running.url}/ (stop it first to start another).`] }
}

/**
 * The child's environment. ELECTRON_RUN_AS_NODE (some IDE terminals set it) would turn Electron
 * into plain Node, and the app would fail on its first `electron` import; electron-vite removes it
 * the same way.
 */
export function childEnvironment(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const clean = { ...env }
  delete clean['ELECTRON_RUN_AS_NODE']
  return clean
}

/** Sent by start.js over the child's IPC channel: quit as the tray's Quit does (drain, then close). */
export const QUIT_MESSAGE = { type: 'leasehold:quit' } as const

export function isQuitMessage(message: unknown): boolean {
  return typeof message === 'object' && message !== null && (message as { type?: unknown }).type === QUIT_MESSAGE.type
}

/**
 * What start.js does with the n-th interrupt (Ctrl-C, SIGTERM, SIGHUP) it receives.
 * - The first asks the child to stop cleanly, so local workers drain and leases are released.
 *   Electron is told over its IPC channel: on Windows `child.kill('SIGINT')` is TerminateProcess,
 *   and the GUI process gets no console Ctrl-C of its own. `leasehold serve` on POSIX gets the
 *   signal (it runs in its own process group, so the terminal's does not reach it); on Windows
 *   it shares the console and has already received the Ctrl-C itself.
 * - A second one means "stop now": the child is killed.
 */
export function stopStep(
  interrupts: number,
  situation: { platform: NodeJS.Platform; child: 'electron' | 'headless'; channel: boolean; signal: NodeJS.Signals },
): { kind: 'message' } | { kind: 'signal'; signal: NodeJS.Signals } | { kind: 'kill' } | { kind: 'none' } {
  if (interrupts > 1) return { kind: 'kill' }
  if (situation.child === 'electron') {
    if (situation.channel) return { kind: 'message' }
    return situation.platform === 'win32' ? { kind: 'kill' } : { kind: 'signal', signal: situation.signal }
  }
  if (situation.platform === 'win32') return { kind: 'none' }
  return { kind: 'signal', signal: situation.signal }
}
