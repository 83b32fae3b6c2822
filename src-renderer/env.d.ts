/// <reference types="svelte" />
/// <reference types="vite/client" />

interface Window {
  /**
   * Handed over by the Electron preload (src-main/preload.ts); absent in a plain browser,
   * where the page is served by the host itself. No token: Electron's main process adds it.
   */
  readonly leasehold?: {
    /** The host's origin, e.g. `http://127.0.0.1:7878`. */
    readonly apiBase: string
  }
}
