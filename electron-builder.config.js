// Packages the desktop app into installers: `npm run dist` builds out/ (electron-vite), the
// native addon for Electron (scripts/rebuild-native.js), then runs electron-builder with this
// file, for the platform it runs on: AppImage and deb on Linux, dmg on macOS, an NSIS installer
// on Windows, in dist/. It needs Electron's download (electron-builder fetches the Electron zip
// it packages), so it has never run on the machines this is built on; test/unit/
// desktop-packaging.test.ts checks what can be checked here: that every file the app opens is
// packaged, and the addon is unpacked from the asar.
import { FuseV1Options, FuseVersion, flipFuses } from '@electron/fuses'
import { join } from 'node:path'
import { APP_FILES } from './scripts/app-files.js'

/**
 * Electron's fuses, flipped in the packaged binary: it cannot be turned into plain Node
 * (ELECTRON_RUN_AS_NODE), nor be handed code through NODE_OPTIONS or --inspect, and it loads
 * its app only from the asar. Cookies are encrypted at rest.
 */
export const FUSES = {
  version: FuseVersion.V1,
  [FuseV1Options.RunAsNode]: false,
  [FuseV1Options.EnableNodeOptionsEnvironmentVariable]: false,
  [FuseV1Options.EnableNodeCliInspectArguments]: false,
  [FuseV1Options.OnlyLoadAppFromAsar]: true,
  [FuseV1Options.EnableCookieEncryption]: true,
}

/**
 * The Electron binary electron-builder has just laid out in `appOutDir`, as @electron/fuses wants
 * it: the .app bundle on macOS, the .exe on Windows, the executable on Linux.
 * @param {{ platform: string, appOutDir: string, productFilename: string, executableName: string }} app
 */
export function packagedElectron({ platform, appOutDir, productFilename, executableName }) {
  if (platform === 'darwin' || platform === 'mas') return join(appOutDir, `${productFilename}.app`)
  if (platform === 'win32') return join(appOutDir, `${productFilename}.exe`)
  return join(appOutDir, executableName)
}

/**
 * After packing, before signing: flip the fuses. On macOS the flip invalidates the ad-hoc
 * signature an unsigned arm64 build relies on, so @electron/fuses re-signs it.
 * @param {import('app-builder-lib').AfterPackContext} context
 */
export async function afterPack(context) {
  const electron = packagedElectron({
    platform: context.electronPlatformName,
    appOutDir: context.appOutDir,
    productFilename: context.packager.appInfo.productFilename,
    executableName: context.packager.executableName,
  })
  await flipFuses(electron, { ...FUSES, resetAdHocDarwinSignature: context.electronPlatformName === 'darwin' })
}

/** @type {import('app-builder-lib').Configuration} */
export default {
  appId: 'dev.leasehold.desktop',
  productName: 'Leasehold',
  directories: { output: 'dist', buildResources: 'build' },
  // The app: the build and the migrations. Production dependencies from node_modules are added
  // by electron-builder; better-sqlite3's sources and its Node build are left out (the app
  // loads the Electron build in out/native).
  files: [
    'package.json',
    'out/main/**',
    'out/preload/**',
    `${APP_FILES.renderer}/**`,
    APP_FILES.nativeAddon,
    APP_FILES.walVfs,
    `${APP_FILES.migrations}/**`,
    '!node_modules/better-sqlite3/{build,deps,src}{,/**}',
  ],
  // A native addon and a SQLite extension are loaded with dlopen, which cannot read inside an asar.
  asarUnpack: [APP_FILES.nativeAddon, APP_FILES.walVfs],
  // rebuild-native.js built the addon into out/native; electron-builder's own rebuild would
  // rebuild node_modules in place for Electron and break `leasehold serve` and the tests.
  npmRebuild: false,
  afterPack,
  linux: { target: ['AppImage', 'deb'], category: 'Development', maintainer: 'Leasehold' },
  mac: { target: 'dmg', category: 'public.app-category.developer-tools' },
  win: { target: 'nsis' },
  nsis: { oneClick: false, perMachine: false },
}
