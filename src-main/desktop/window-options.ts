import type { BrowserWindowConstructorOptions } from 'electron'

/**
 * The options of the dashboard window, per Electron's security checklist. Kept apart from
 * electron.ts (and importing Electron's types only) so a unit test can read them without
 * Electron running: turning one of these off must fail that test. The DevTools exist only
 * when asked for (in development, `electron-vite dev`); elsewhere no menu or shortcut opens them.
 */
export function windowOptions(preloadPath: string, options: { devTools?: boolean } = {}): BrowserWindowConstructorOptions {
  return {
    width: 1100,
    height: 760,
    title: 'Leasehold',
    // Shown once the first frame is painted, so the window never flashes white.
    show: false,
    webPreferences: {
      preload: preloadPath,
      contextIsolation: true,
      sandbox: true,
      nodeIntegration: false,
      nodeIntegrationInWorker: false,
      nodeIntegrationInSubFrames: false,
      webSecurity: true,
      allowRunningInsecureContent: false,
      webviewTag: false,
      experimentalFeatures: false,
      spellcheck: false,
      devTools: options.devTools ?? false,
    },
  }
}

/** Where the renderer may reach besides its own files. */
export interface CspSources {
  /** The host's base URL, e.g. `http://127.0.0.1:4319`: the only API the page may call. */
  apiBase: string
  /**
   * The Vite dev server, in development only: its HMR socket is allowed and, because Vite
   * injects component styles as `<style>` elements, inline styles too.
   */
  devServerUrl?: string
}

/**
 * The page's Content-Security-Policy: scripts, styles and images from the page's own origin,
 * network calls to the host only, no plugins, frames, forms or `<base>` rewriting.
 */
export function contentSecurityPolicy({ apiBase, devServerUrl }: CspSources): string {
  const api = new URL(apiBase).origin
  const connect = ["'self'", api]
  const style = ["'self'"]
  if (devServerUrl !== undefined) {
    const dev = new URL(devServerUrl)
    connect.push(`${dev.protocol === 'https:' ? 'wss' : 'ws'}://${dev.host}`)
    style.push("'unsafe-inline'")
  }
  return [
    "default-src 'self'",
    `connect-src ${connect.join(' ')}`,
    `style-src ${style.join(' ')}`,
    "object-src 'none'",
    "frame-src 'none'",
    "form-action 'none'",
    "base-uri 'none'",
  ].join('; ')
}
