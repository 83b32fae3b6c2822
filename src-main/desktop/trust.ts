// Whom the desktop shell trusts, as pure functions: which IPC senders it answers, which requests
// get the API token, and which development server it may load. electron.ts applies them.

/** What an IPC message says about where it came from (Electron's `event.senderFrame`). */
export interface SenderFrame {
  /** The frame's origin, e.g. `http://127.0.0.1:7878`; null when the frame is gone. */
  origin: string | null
  /** A top-level frame, not an iframe. */
  isTopFrame: boolean
  /** Sent by the web contents of the window the shell opened. */
  fromOurWindow: boolean
}

/**
 * An IPC message is answered only when it comes from the top frame of our window, showing the
 * page of `pageOrigin`: not from a frame the page might embed, nor from a page the window was
 * somehow navigated to.
 */
export function trustedSender(frame: SenderFrame, pageOrigin: string): boolean {
  return frame.fromOurWindow && frame.isTopFrame && frame.origin !== null && frame.origin === new URL(pageOrigin).origin
}

/**
 * The headers of a request the window sends: requests to the page's own origin (where the API
 * is) get the bearer token, added here by the main process so the page itself never holds it.
 * The renderer sends an empty `Bearer` there, which is replaced; a token the user typed into
 * the page (after a 401, when the host was started with another token) is left as it is.
 * Requests to any other origin never get the token (the page's CSP allows none anyway).
 */
export function withAuthorization(
  url: string,
  headers: Record<string, string>,
  api: { origin: string; token: string },
): Record<string, string> {
  let origin: string
  try {
    origin = new URL(url).origin
  } catch {
    return headers
  }
  if (origin !== new URL(api.origin).origin) return headers
  const result: Record<string, string> = {}
  for (const [name, value] of Object.entries(headers)) {
    if (name.toLowerCase() !== 'authorization') result[name] = value
    else if (/^Bearer\s+\S/i.test(value)) return headers
  }
  result['Authorization'] = `Bearer ${api.token}`
  return result
}

const LOOPBACK = new Set(['localhost', '127.0.0.1', '[::1]'])

/**
 * The page to load instead of the host's, set by `electron-vite dev` in ELECTRON_RENDERER_URL.
 * Honoured only from the source tree and on this machine: the window sends the API token to the
 * page's origin, so a packaged app must not be pointed elsewhere by an environment variable.
 */
export function developmentServer(env: NodeJS.ProcessEnv, isPackaged: boolean): string | undefined {
  const raw = env['ELECTRON_RENDERER_URL']
  if (isPackaged || !raw) return undefined
  try {
    const url = new URL(raw)
    return url.protocol === 'http:' && LOOPBACK.has(url.hostname) ? raw : undefined
  } catch {
    return undefined
  }
}
