/// <reference types="svelte" />
/// <reference types="vite/client" />

interface Window {
  /**
   * Handed over by the Electron preload (src-main/preload.ts); absent in a plain browser,
   * where the page is served by the host itself.
   */
  readonly leasehold?: {
    /** The host's origin, e.g. `http://127.0.0.1:7878`. */
    readonly apiBase: string
    /** The bearer token for `/api` calls. */
    readonly token: string
  }
}
