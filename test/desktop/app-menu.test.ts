import type { MenuItemConstructorOptions } from 'electron'
import { describe, expect, test } from 'vitest'
import { applicationMenu } from '../../src-main/desktop/app-menu'
import { windowOptions } from '../../src-main/desktop/window-options'

/** Every role in a menu template, submenus included. */
function roles(items: MenuItemConstructorOptions[]): string[] {
  return items.flatMap((item) => [...(item.role ? [item.role] : []), ...(Array.isArray(item.submenu) ? roles(item.submenu) : [])])
}

describe('applicationMenu', () => {
  test.each(['linux', 'win32', 'darwin'] as const)('no DevTools or reload outside development (%s)', (platform) => {
    const all = roles(applicationMenu({ platform, devTools: false }))
    expect(all).not.toContain('toggleDevTools')
    expect(all).not.toContain('reload')
    expect(all).not.toContain('forceReload')
    // Electron's stock View menu would bring the DevTools back.
    expect(all).not.toContain('viewMenu')
  })

  test('development has them', () => {
    expect(roles(applicationMenu({ platform: 'linux', devTools: true }))).toContain('toggleDevTools')
  })

  test('macOS gets its app menu, the others a File menu with Quit', () => {
    expect(applicationMenu({ platform: 'darwin', devTools: false })[0]).toEqual({ role: 'appMenu' })
    expect(applicationMenu({ platform: 'win32', devTools: false })[0]).toEqual({ role: 'fileMenu' })
  })
})

describe('windowOptions devTools', () => {
  test('off unless asked for', () => {
    expect(windowOptions('/p.cjs').webPreferences?.devTools).toBe(false)
    expect(windowOptions('/p.cjs', { devTools: true }).webPreferences?.devTools).toBe(true)
  })
})
