/** How the renderer reaches the host: the only thing the preload hands over. */
export interface Connection {
  /** The host's base URL, e.g. `http://127.0.0.1:4319`. */
  apiBase: string
  /** The bearer token every `/api` call carries. */
  token: string
}

/** The one IPC message between the preload and the main process. */
export const CONNECTION_CHANNEL = 'leasehold:connection'
