// Runs sandboxed before the page: hands the renderer the host's URL and token, nothing else.
// The renderer then talks to the host over HTTP like any browser would (DESIGN.md, "One UI
// path"). The pair comes from the main process over a synchronous IPC call rather than
// `additionalArguments`, because a renderer's command line is readable by every local user
// (`ps`, /proc/<pid>/cmdline) and the token is a secret.
import { contextBridge, ipcRenderer } from 'electron'
import { CONNECTION_CHANNEL, type Connection } from './preload-channel'

const connection = ipcRenderer.sendSync(CONNECTION_CHANNEL) as Connection | null

if (connection !== null) {
  contextBridge.exposeInMainWorld('leasehold', Object.freeze({ apiBase: connection.apiBase, token: connection.token }))
}
