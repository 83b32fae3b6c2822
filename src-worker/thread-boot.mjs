// Starts a handler thread from the TypeScript sources (under plain Node, through tsx). A built
// worker starts the compiled handler-thread.js directly instead.
import { workerData } from 'node:worker_threads'
import { tsImport } from 'tsx/esm/api'

await tsImport(workerData.entry, import.meta.url)
