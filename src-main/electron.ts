// The desktop shell: a composition root and nothing more (docs/architecture.md, "The processes").
// It starts the same host `leasehold serve` starts — or, when one already runs on the data dir,
// opens its window on that one — opens one locked-down window onto it and stops the host it
// started before the process goes. No scheduling rule lives here; every decision it makes is a
// pure function under src-main/desktop/ with its unit tests.
import { BrowserWindow, Menu, Tray, app, dialog, ipcMain, nativeImage, powerMonitor, session, utilityProcess, type IpcMainEvent, type WebContents } from 'electron'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { APP_FILES } from '../scripts/app-files.js'
import { defaultDataDir, parseServeArgs, type HostConfig } from './config'
import { ConfigError } from '../src-shared/command-line'
import { splitArgs } from './desktop/app-args'
import { applicationMenu } from './desktop/app-menu'
import { isQuitMessage } from './desktop/launch'
import { runningHost } from './desktop/running-host'
import { developmentServer, trustedSender, withAuthorization } from './desktop/trust'
import { loadOrCreateToken, startHost, type Host } from './host'
import { utilitySpawner } from './pool/spawn-electron'
import { CONNECTION_CHANNEL, type Connection } from './desktop/preload-channel'
import { TRAY_ICON_16, TRAY_ICON_32 } from './desktop/tray-icon'
import { trayMenuLines, trayTooltip } from './desktop/tray-status'
import { contentSecurityPolicy, windowOptions } from './desktop/window-options'

/** What the window shows: the host this app started, or one that was already running (`host` null). */
interface Target {
  /** The host's base URL, e.g. http://127.0.0.1:7878 */
  url: string
  token: string
  host: Host | null
}

/** `electron-vite dev`: the renderer comes from Vite's dev server, which proxies the API. Never in a packaged app. */
const devServerUrl = developmentServer(process.env, app.isPackaged)

/** The target once asked for; quitting waits for it even if its host is still starting. */
let starting: Promise<Target> | null = null
let window: BrowserWindow | null = null
let tray: Tray | null = null

// Every renderer sandboxed, whatever a window's options say. Must come before `ready`.
app.enableSandbox()

const config = readConfig()
if (config !== null) {
  // One data dir, one app: the single-instance lock lives in userData, so it follows --data-dir
  // (by default both are the same folder, ~/.config/leasehold and its platform equivalents).
  app.setPath('userData', config.dataDir)
  if (!app.requestSingleInstanceLock()) {
    // Another Leasehold app owns this data dir: it shows its window (second-instance) and we go.
    app.quit()
  } else {
    setupSecondInstance()
    setupContentsHardening()
    setupQuit()
    setupQuitMessage()
    app.whenReady().then(() => onReady(config)).catch(fail)
  }
}

/**
 * `npm start -- --port 9000` works as `leasehold serve --port 9000` does: Leasehold's own flags
 * are read from the command line, then LEASEHOLD_* variables, then the defaults; every other
 * argument is Chromium's or Electron's and is left to them (desktop/app-args.ts).
 */
function readConfig(): HostConfig | null {
  try {
    // argv[0] is Electron; the app path (`.` from the source tree) is no flag and is left alone.
    const { leasehold } = splitArgs(process.argv.slice(1))
    return parseServeArgs(leasehold, process.env, { dataDir: defaultDataDir(process.env) }) // an absolute data dir, which app.setPath needs
  } catch (error) {
    fail(error)
    return null
  }
}

async function onReady(config: HostConfig): Promise<void> {
  denyPermissions()
  Menu.setApplicationMenu(Menu.buildFromTemplate(applicationMenu({ platform: process.platform, devTools: devServerUrl !== undefined })))
  starting = connect(config)
  const target = await starting
  if (target.host) setupTray(target.host)
  setupConnectionChannel(target)
  setupContentSecurityPolicy(target)
  setupAuthorization(target)
  showWindow()
  // macOS: clicking the dock icon after the window was closed opens it again.
  app.on('activate', showWindow)
  app.on('window-all-closed', () => {
    // On macOS an app lives on without windows (the dock reopens one); elsewhere closing it quits.
    if (process.platform !== 'darwin') app.quit()
  })
}

/**
 * A host already running on this data dir (`leasehold serve`, found by its host.json, the data
 * dir's lock it holds and its health answer) gets a window of its own instead of a second host
 * that would migrate the same database and fail on the taken port. Otherwise the app starts its
 * host (a host.json left by a killed host is removed as it takes the lock).
 */
async function connect(config: HostConfig): Promise<Target> {
  const running = await runningHost(config.dataDir, electronNativeBinding())
  if (running !== null) {
    console.error(`leasehold: a host is already running at ${running.url} (pid ${running.pid}); this window shows it and leaves it running when closed.`)
    return { url: running.url, token: loadOrCreateToken(config.dataDir, config.token), host: null }
  }
  const host = await startHost(config, {
    // drizzle/ sits beside package.json, in the source tree and in the packaged app alike.
    migrationsFolder: join(app.getAppPath(), APP_FILES.migrations),
    rendererDir: join(app.getAppPath(), APP_FILES.renderer),
    // Local workers are utility processes running the built worker entry (out/main/worker.js).
    spawn: utilitySpawner((modulePath, args, options) => utilityProcess.fork(modulePath, args, options)),
    // Someone at the keyboard makes the machine busier (auto busy rating).
    userIdleSeconds: () => powerMonitor.getSystemIdleTime(),
    nativeBinding: electronNativeBinding(),
  })
  return { url: host.url, token: host.token, host }
}

/**
 * The page the window shows. Both are same-origin with the API, which the host requires: it
 * refuses a foreign or `null` Origin and sends no CORS headers (docs/api.md, "Host and
 * Origin"). In development Vite's dev server proxies /api and /internal to the host.
 */
function pageUrl(target: Target): string {
  return devServerUrl ?? `${target.url}/`
}

/** Shows the window, opening it if there is none (closed on macOS, or not yet opened). */
function showWindow(): void {
  if (window) {
    if (window.isMinimized()) window.restore()
    window.show()
    window.focus()
    return
  }
  void starting?.then(openWindow, () => undefined)
}

function openWindow(target: Target): void {
  if (window) return
  const preload = join(app.getAppPath(), APP_FILES.preload)
  const opened = new BrowserWindow(windowOptions(preload, { devTools: devServerUrl !== undefined }))
  window = opened
  opened.once('ready-to-show', () => opened.show())
  opened.on('closed', () => {
    if (window === opened) window = null
  })
  void opened.loadURL(pageUrl(target))
}

/**
 * better-sqlite3 built for Electron's ABI by scripts/rebuild-native.js (npm start runs it), kept
 * apart from node_modules so the Node build there stays what `leasehold serve` and the tests load.
 * In a packaged app it sits in app.asar.unpacked, which Electron's asar support resolves.
 */
function electronNativeBinding(): string | undefined {
  const binding = join(app.getAppPath(), APP_FILES.nativeAddon)
  return existsSync(binding) ? binding : undefined
}

/** A tray icon whose tooltip and menu show capacity in use and open blockers, kept current by events. */
function setupTray(running: Host): void {
  const icon = nativeImage.createFromDataURL(TRAY_ICON_16)
  icon.addRepresentation({ scaleFactor: 2, dataURL: TRAY_ICON_32 })
  tray = new Tray(icon)
  const refresh = () => {
    const capacity = running.engine.getCapacity()
    const open = running.engine.openBlockerCount()
    tray?.setToolTip(trayTooltip(capacity, open))
    tray?.setContextMenu(
      Menu.buildFromTemplate([
        ...trayMenuLines(capacity, open).map((label) => ({ label, enabled: false })),
        { type: 'separator' as const },
        { label: 'Show Leasehold', click: showWindow },
        { label: 'Quit', click: () => app.quit() },
      ]),
    )
  }
  let scheduled: NodeJS.Timeout | null = null
  running.engine.onEvent(() => {
    scheduled ??= setTimeout(() => {
      scheduled = null
      refresh()
    }, 500) // at most twice a second, however busy the log
  })
  refresh()
}

/**
 * Answers an IPC channel only for our window's top frame at the page's origin
 * (desktop/trust.ts); anyone else gets null. Every channel the shell listens on goes through it.
 */
function answerTrusted(channel: string, pageOrigin: string, answer: () => unknown): void {
  ipcMain.on(channel, (event: IpcMainEvent) => {
    const frame = event.senderFrame
    const trusted = trustedSender(
      { origin: frame?.origin ?? null, isTopFrame: frame !== null && frame.parent === null, fromOurWindow: window !== null && event.sender === window.webContents },
      pageOrigin,
    )
    event.returnValue = trusted ? answer() : null
  })
}

/** The preload asks once, synchronously, for the API's base URL (the token stays here). */
function setupConnectionChannel(target: Target): void {
  const origin = new URL(pageUrl(target)).origin
  const connection: Connection = { apiBase: origin }
  answerTrusted(CONNECTION_CHANNEL, origin, () => connection)
}

/**
 * The token travels only from here: every request the window sends to the page's origin (the
 * host, or in development Vite's proxy to it) gets `Authorization: Bearer <token>`.
 */
function setupAuthorization(target: Target): void {
  const api = { origin: new URL(pageUrl(target)).origin, token: target.token }
  session.defaultSession.webRequest.onBeforeSendHeaders({ urls: [`${api.origin}/*`] }, (details, callback) => {
    callback({ requestHeaders: withAuthorization(details.url, details.requestHeaders, api) })
  })
}

/** The CSP arrives as a response header on the page itself, so the page cannot loosen it. */
function setupContentSecurityPolicy(target: Target): void {
  const origin = new URL(pageUrl(target)).origin
  const policy = contentSecurityPolicy(devServerUrl === undefined ? { apiBase: target.url } : { apiBase: target.url, devServerUrl })
  session.defaultSession.webRequest.onHeadersReceived({ urls: [`${origin}/*`] }, (details, callback) => {
    const headers = { ...details.responseHeaders }
    for (const name of Object.keys(headers)) {
      if (name.toLowerCase() === 'content-security-policy') delete headers[name]
    }
    headers['Content-Security-Policy'] = [policy]
    callback({ responseHeaders: headers })
  })
}

/** Notifications, camera, clipboard, geolocation…: the dashboard needs none of them. */
function denyPermissions(): void {
  session.defaultSession.setPermissionRequestHandler((_contents, _permission, callback) => callback(false))
  session.defaultSession.setPermissionCheckHandler(() => false)
}

/** Every web contents, present or future: no navigation, no new windows, no <webview>. */
function setupContentsHardening(): void {
  app.on('web-contents-created', (_event, contents: WebContents) => {
    contents.on('will-navigate', (event) => event.preventDefault())
    contents.on('will-redirect', (event) => {
      if (event.isMainFrame) event.preventDefault()
    })
    contents.on('will-attach-webview', (event) => event.preventDefault())
    contents.setWindowOpenHandler(() => ({ action: 'deny' }))
  })
}

/** A second launch (npm start again, or the app's icon) shows the window, opening it again if it was closed. */
function setupSecondInstance(): void {
  app.on('second-instance', showWindow)
}

/**
 * `npm start` asks for a clean quit over the IPC channel it opened (scripts/start.js): on Windows
 * a signal would end the process outright, before the pool drains.
 */
function setupQuitMessage(): void {
  process.on('message', (message) => {
    if (isQuitMessage(message)) app.quit()
  })
}

/**
 * Quitting waits for the host to stop (in-flight requests finish, the database closes
 * cleanly): the first `before-quit` is held back, later ones are ignored until it is done.
 */
function setupQuit(): void {
  let stopping = false
  app.on('before-quit', (event) => {
    event.preventDefault()
    if (stopping) return
    stopping = true
    stopHost().then(
      () => app.exit(0),
      (error: unknown) => {
        console.error(`leasehold: the host did not stop cleanly: ${(error as Error).message}`)
        app.exit(1)
      },
    )
  })
}

/**
 * A host that cannot start (bad flag or LEASEHOLD_* value, port taken, damaged database) ends the
 * app, with `leasehold serve`'s exit codes: 2 for a bad value, 1 for the rest.
 */
function fail(error: unknown): void {
  const message = error instanceof Error ? error.message : String(error)
  console.error(`leasehold: ${message}`)
  dialog.showErrorBox('Leasehold could not start', message)
  void stopHost()
    .catch(() => undefined)
    .finally(() => app.exit(error instanceof ConfigError ? 2 : 1))
}

/** Stops the host this app started, if it did (`stop()` is idempotent); a window on another host leaves that host alone. */
async function stopHost(): Promise<void> {
  const target = await starting?.catch(() => null)
  await target?.host?.stop()
}
