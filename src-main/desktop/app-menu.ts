import type { MenuItemConstructorOptions } from 'electron'

/**
 * The application menu: what a desktop app needs (quit, copy and paste, close, zoom) and, in
 * development only (`electron-vite dev`), reload and the DevTools. Electron's default menu
 * offers the DevTools in every build, which would put the page's JavaScript console — and so
 * the full-power API — one shortcut away from anyone at the keyboard.
 */
export function applicationMenu(options: { platform: NodeJS.Platform; devTools: boolean }): MenuItemConstructorOptions[] {
  const view: MenuItemConstructorOptions[] = [{ role: 'resetZoom' }, { role: 'zoomIn' }, { role: 'zoomOut' }, { type: 'separator' }, { role: 'togglefullscreen' }]
  if (options.devTools) view.unshift({ role: 'reload' }, { role: 'forceReload' }, { role: 'toggleDevTools' }, { type: 'separator' })
  const menu: MenuItemConstructorOptions[] = [
    { role: 'editMenu' },
    { label: 'View', submenu: view },
    { role: 'windowMenu' },
  ]
  // macOS shows the first menu under the app's name; elsewhere the File menu holds Quit.
  menu.unshift(options.platform === 'darwin' ? { role: 'appMenu' } : { role: 'fileMenu' })
  return menu
}
