// The files the desktop app opens by path, relative to the package root (Electron's app path,
// in the source tree and in the packaged app alike). One list for the code that opens them
// (src-main/electron.ts), the script that builds the native addon (rebuild-native.js) and the
// packaging configuration (electron-builder.config.js), whose unit test checks it packages
// every one of them.

/** Paths under the app path that the desktop app opens. */
export const APP_FILES = Object.freeze({
  /** The main process entry, package.json "main". */
  main: 'out/main/electron.js',
  /** The local worker entry, started as a utility process (src-main/pool/spawn.ts). */
  worker: 'out/main/worker.js',
  /** The sandboxed preload (src-main/electron.ts). */
  preload: 'out/preload/preload.cjs',
  /** The built dashboard the host serves at `/`. */
  renderer: 'out/renderer',
  /** SQL migrations, read at every start. */
  migrations: 'drizzle',
  /** better-sqlite3 built for Electron's ABI (scripts/rebuild-native.js); loaded with dlopen, so unpacked from the asar. */
  nativeAddon: 'out/native/better_sqlite3.node',
  /** The SQLite extension that writes each commit to the log in one call (scripts/wal-vfs.js); loaded with dlopen, so unpacked from the asar. */
  walVfs: 'out/native/wal-vfs.so',
})
