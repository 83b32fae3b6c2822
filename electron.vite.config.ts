// Builds the desktop app into out/: main (src-main/electron.ts), the sandboxed preload
// (src-main/preload.ts) and the renderer (src-renderer/index.html). The source folders are
// not electron-vite's default src/main, src/preload, src/renderer, so each entry is named here.
import { svelte } from '@sveltejs/vite-plugin-svelte'
import { defineConfig } from 'electron-vite'
import { resolve } from 'node:path'
import type { Plugin } from 'vite'

const root = import.meta.dirname

/**
 * Where `electron-vite dev` proxies API calls: the host the app starts, on the port
 * `leasehold serve` would use (LEASEHOLD_PORT, default 7878). The renderer then calls its
 * own origin, which is what the host's Origin check and its lack of CORS headers require.
 */
const devApiTarget = `http://127.0.0.1:${process.env['LEASEHOLD_PORT'] ?? '7878'}`

/**
 * A baseline CSP in the built page, for when it is served by `leasehold serve` to a plain
 * browser; the Electron shell adds its own, stricter policy as a response header. Build only:
 * in development Vite injects component styles inline and talks to its HMR socket.
 */
function builtPageCsp(): Plugin {
  const policy = "default-src 'self'; connect-src 'self'; object-src 'none'; frame-src 'none'; form-action 'none'; base-uri 'none'"
  return {
    name: 'leasehold:built-page-csp',
    apply: 'build',
    transformIndexHtml: () => [{ tag: 'meta', attrs: { 'http-equiv': 'Content-Security-Policy', content: policy }, injectTo: 'head-prepend' }],
  }
}

export default defineConfig({
  main: {
    build: {
      outDir: resolve(root, 'out/main'),
      // Every package.json dependency stays an import resolved from node_modules at run time;
      // better-sqlite3 above all, a native addon that must never be bundled.
      externalizeDeps: { include: ['better-sqlite3'] },
      rolldownOptions: {
        // The worker process and its handler threads are entries of their own: the pool starts
        // out/main/worker.js as a utility process, which starts out/main/handler-thread.js.
        input: {
          electron: resolve(root, 'src-main/electron.ts'),
          worker: resolve(root, 'src-worker/main.ts'),
          'handler-thread': resolve(root, 'src-worker/handler-thread.ts'),
        },
      },
    },
  },
  preload: {
    build: {
      outDir: resolve(root, 'out/preload'),
      rolldownOptions: {
        input: { preload: resolve(root, 'src-main/preload.ts') },
        // A sandboxed preload cannot be an ES module: one CommonJS file, `.cjs` because the
        // package is "type": "module".
        output: { format: 'cjs', entryFileNames: '[name].cjs' },
      },
    },
  },
  renderer: {
    root: resolve(root, 'src-renderer'),
    plugins: [svelte(), builtPageCsp()],
    server: {
      proxy: {
        '^/(api|internal)(/|$)': {
          target: devApiTarget,
          changeOrigin: true, // Host: 127.0.0.1:<port>, the name the host's Host check accepts
          configure: (proxy) => {
            // Browsers send Origin on POSTs even to their own origin; the dev server's origin
            // is not the host's, and the host refuses a foreign Origin.
            proxy.on('proxyReq', (request) => request.removeHeader('origin'))
          },
        },
      },
    },
    build: {
      outDir: resolve(root, 'out/renderer'),
      rolldownOptions: {
        input: resolve(root, 'src-renderer/index.html'),
      },
    },
  },
})
