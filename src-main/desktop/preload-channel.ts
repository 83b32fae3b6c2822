/**
 * How the renderer reaches the host: the only thing the preload hands over. The token is not
 * part of it: the main process adds the `Authorization` header to the window's requests to this
 * origin (src-main/desktop/trust.ts), so no script in the page can read the token.
 */
export interface Connection {
  /** The API's base URL, the page's own origin, e.g. `http://127.0.0.1:4319`. */
  apiBase: string
}

/** The one IPC message between the preload and the main process. */
export const CONNECTION_CHANNEL = 'leasehold:connection'
