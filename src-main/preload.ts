// Runs sandboxed before the page: hands the renderer the API's base URL, nothing else. The
// renderer then talks to the host over HTTP like any browser would (docs/architecture.md, "The processes"),
// and the main process adds the bearer token to those requests, so the page never holds it.
// The URL comes from the main process over a synchronous IPC call, which the main process
// answers only for its own window's top frame at the expected origin.
import { contextBridge, ipcRenderer } from 'electron'
import { CONNECTION_CHANNEL, type Connection } from './desktop/preload-channel'

const connection = ipcRenderer.sendSync(CONNECTION_CHANNEL) as Connection | null

if (connection !== null) {
  contextBridge.exposeInMainWorld('leasehold', Object.freeze({ apiBase: connection.apiBase }))
}
