import { describe, expect, test } from 'vitest'
import { diagnoseSandbox, type SandboxFacts } from '../../src-main/desktop/sandbox'

const ELECTRON = '/home/ada/leasehold/node_modules/electron/dist/electron'
const HELPER = '/home/ada/leasehold/node_modules/electron/dist/chrome-sandbox'

/** Ubuntu 24.04 with Electron fresh from npm: the case of electron/electron#42510. */
const ubuntu2404: SandboxFacts = {
  platform: 'linux',
  electronPath: ELECTRON,
  helper: { path: HELPER, uid: 1000, mode: 0o100755 },
  apparmorRestrictsUserns: true,
  apparmorProfileForElectron: false,
  usernsDisabled: false,
  noSandboxRequested: false,
}

describe('diagnoseSandbox', () => {
  test('AppArmor restricting user namespaces and a helper not root 4755 is a problem, with the exact remedy', () => {
    const problem = diagnoseSandbox(ubuntu2404)
    expect(problem?.summary).toBe(
      `Electron's sandbox cannot start: AppArmor denies unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns=1), and ${HELPER} is not owned by root with mode 4755.`,
    )
    const remedy = problem!.remedy.join('\n')
    expect(remedy).toContain(`sudo chown root:root '${HELPER}' && sudo chmod 4755 '${HELPER}'`)
    expect(remedy).toContain(`profile leasehold-electron "%s" flags=(unconfined) {\\n  userns,\\n}\\n' '${ELECTRON}' | sudo tee /etc/apparmor.d/leasehold-electron`)
    expect(remedy).toContain('sudo apparmor_parser -r /etc/apparmor.d/leasehold-electron')
  })

  test('the remedy names --no-sandbox only as the user’s own choice', () => {
    const lines = diagnoseSandbox(ubuntu2404)!.remedy.filter((line) => line.includes('--no-sandbox'))
    expect(lines).toEqual(['  (npm start -- --no-sandbox runs it without the sandbox, at your own risk: the page would lose its last line of defence.)'])
  })

  test('a helper owned by root with mode 4755 is what Chromium accepts', () => {
    expect(diagnoseSandbox({ ...ubuntu2404, helper: { path: HELPER, uid: 0, mode: 0o104755 } })).toBeNull()
    // root-owned but not setuid, or setuid but group-writable: still refused by Chromium
    expect(diagnoseSandbox({ ...ubuntu2404, helper: { path: HELPER, uid: 0, mode: 0o100755 } })).not.toBeNull()
    expect(diagnoseSandbox({ ...ubuntu2404, helper: { path: HELPER, uid: 0, mode: 0o104775 } })).not.toBeNull()
  })

  test('user namespaces allowed: the helper is not needed', () => {
    expect(diagnoseSandbox({ ...ubuntu2404, apparmorRestrictsUserns: false })).toBeNull()
  })

  test('an AppArmor profile for this Electron lifts the restriction', () => {
    expect(diagnoseSandbox({ ...ubuntu2404, apparmorProfileForElectron: true })).toBeNull()
  })

  test('user namespaces switched off in the kernel: the remedy is the helper or the sysctl', () => {
    const problem = diagnoseSandbox({ ...ubuntu2404, apparmorRestrictsUserns: false, usernsDisabled: true })
    expect(problem?.summary).toContain('this kernel does not allow unprivileged user namespaces')
    expect(problem?.remedy).toContain('       sudo sysctl -w kernel.unprivileged_userns_clone=1')
    // the profile does not help there
    expect(diagnoseSandbox({ ...ubuntu2404, usernsDisabled: true, apparmorProfileForElectron: true })).not.toBeNull()
  })

  test('--no-sandbox given by the user: not second-guessed', () => {
    expect(diagnoseSandbox({ ...ubuntu2404, noSandboxRequested: true })).toBeNull()
  })

  test('only Linux has the SUID helper', () => {
    expect(diagnoseSandbox({ ...ubuntu2404, platform: 'darwin' })).toBeNull()
    expect(diagnoseSandbox({ ...ubuntu2404, platform: 'win32' })).toBeNull()
    expect(diagnoseSandbox({ ...ubuntu2404, helper: null })).toBeNull()
  })

  test('a path with a quote is quoted for the shell', () => {
    const odd = "/home/o'brien/chrome-sandbox"
    const remedy = diagnoseSandbox({ ...ubuntu2404, helper: { path: odd, uid: 1000, mode: 0o100755 } })!.remedy.join('\n')
    expect(remedy).toContain(`sudo chmod 4755 '/home/o'\\''brien/chrome-sandbox'`)
  })
})
