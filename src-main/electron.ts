// The desktop shell: a composition root and nothing more (DESIGN.md, "Electron is a shell").
// It starts the same host `leasehold serve` starts, opens one locked-down window onto it and
// stops the host before the process goes. No scheduling rule lives here.
import { BrowserWindow, Menu, Tray, app, dialog, ipcMain, nativeImage, powerMonitor, session, type IpcMainEvent, type WebContents } from 'electron'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseServeArgs } from './config'
import { startHost, type Host } from './host'
import { utilitySpawner } from './pool/spawn-electron'
import { CONNECTION_CHANNEL, type Connection } from './preload-channel'
import { TRAY_ICON_16, TRAY_ICON_32 } from './tray-icon'
import { trayMenuLines, trayTooltip } from './tray-status'
import { contentSecurityPolicy, windowOptions } from './window-options'

/** Set by `electron-vite dev`: the renderer comes from Vite's dev server, which proxies the API. */
const devServerUrl = process.env['ELECTRON_RENDERER_URL']

/** The host once asked to start; quitting waits for it even if it is still starting. */
let starting: Promise<Host> | null = null
let window: BrowserWindow | null = null
let tray: Tray | null = null

if (!app.requestSingleInstanceLock()) {
  // Another Leasehold owns the database and the port: hand over to it.
  app.quit()
} else {
  setupSecondInstance()
  setupContentsHardening()
  setupQuit()
  app.whenReady().then(onReady).catch(fail)
}

async function onReady(): Promise<void> {
  denyPermissions()
  starting = startHost(parseServeArgs([], process.env, { dataDir: app.getPath('userData') }), {
    // drizzle/ sits beside package.json, in the source tree and in the packaged app alike.
    migrationsFolder: join(app.getAppPath(), 'drizzle'),
    rendererDir: join(app.getAppPath(), 'out', 'renderer'),
    // Local workers are utility processes running the built worker entry (out/main/worker.js).
    spawn: utilitySpawner,
    // Someone at the keyboard makes the machine busier (auto busy rating).
    userIdleSeconds: () => powerMonitor.getSystemIdleTime(),
    nativeBinding: electronNativeBinding(),
  })
  const host = await starting
  setupTray(host)
  setupConnectionChannel(host)
  setupContentSecurityPolicy(host)
  openWindow(host)
  app.on('activate', () => {
    if (BrowserWindow.getAllWindows().length === 0) openWindow(host)
  })
  app.on('window-all-closed', () => {
    // On macOS an app lives on without windows (the dock reopens one); elsewhere closing it quits.
    if (process.platform !== 'darwin') app.quit()
  })
}

/**
 * The page the window shows. Both are same-origin with the API, which the host requires: it
 * refuses a foreign or `null` Origin and sends no CORS headers (CONTRACTS.md, "Security of
 * the HTTP server"). In development Vite's dev server proxies /api and /internal to the host.
 */
function pageUrl(running: Host): string {
  return devServerUrl ?? `${running.url}/`
}

function openWindow(running: Host): void {
  const preload = fileURLToPath(new URL('../preload/preload.cjs', import.meta.url))
  const opened = new BrowserWindow(windowOptions(preload))
  window = opened
  opened.once('ready-to-show', () => opened.show())
  opened.on('closed', () => {
    if (window === opened) window = null
  })
  void opened.loadURL(pageUrl(running))
}

/**
 * better-sqlite3 built for Electron's ABI by scripts/rebuild-native.js (npm start runs it), kept
 * apart from node_modules so the Node build there stays what `leasehold serve` and the tests load.
 */
function electronNativeBinding(): string | undefined {
  const binding = join(app.getAppPath(), 'out', 'native', 'better_sqlite3.node')
  return existsSync(binding) ? binding : undefined
}

/** A tray icon whose tooltip and menu show capacity in use and open blockers, kept current by events. */
function setupTray(running: Host): void {
  const icon = nativeImage.createFromDataURL(TRAY_ICON_16)
  icon.addRepresentation({ scaleFactor: 2, dataURL: TRAY_ICON_32 })
  tray = new Tray(icon)
  const refresh = () => {
    const capacity = running.engine.getCapacity()
    const open = running.engine.listBlockers('OPEN').length
    tray?.setToolTip(trayTooltip(capacity, open))
    tray?.setContextMenu(
      Menu.buildFromTemplate([
        ...trayMenuLines(capacity, open).map((label) => ({ label, enabled: false })),
        { type: 'separator' as const },
        { label: 'Show Leasehold', click: () => (window ? window.show() : openWindow(running)) },
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

/** The preload asks once, synchronously, for the API base and token; only our window is answered. */
function setupConnectionChannel(running: Host): void {
  const connection: Connection = { apiBase: new URL(pageUrl(running)).origin, token: running.token }
  ipcMain.on(CONNECTION_CHANNEL, (event: IpcMainEvent) => {
    const fromOurWindow = window !== null && event.sender === window.webContents
    const fromTopFrame = event.senderFrame !== null && event.senderFrame.parent === null
    event.returnValue = fromOurWindow && fromTopFrame ? connection : null
  })
}

/** The CSP arrives as a response header on the page itself, so the page cannot loosen it. */
function setupContentSecurityPolicy(running: Host): void {
  const origin = new URL(pageUrl(running)).origin
  const policy = contentSecurityPolicy(
    devServerUrl === undefined ? { apiBase: running.url } : { apiBase: running.url, devServerUrl },
  )
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

function setupSecondInstance(): void {
  app.on('second-instance', () => {
    if (!window) return
    if (window.isMinimized()) window.restore()
    window.show()
    window.focus()
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

/** A host that cannot start (bad LEASEHOLD_* value, port taken, damaged database) ends the app. */
function fail(error: unknown): void {
  const message = error instanceof Error ? error.message : String(error)
  console.error(`leasehold: ${message}`)
  dialog.showErrorBox('Leasehold could not start', message)
  void stopHost()
    .catch(() => undefined)
    .finally(() => app.exit(1))
}

/** Stops the host if one was started (`stop()` is idempotent); a host that never started has nothing to stop. */
async function stopHost(): Promise<void> {
  const host = await starting?.catch(() => null)
  await host?.stop()
}
