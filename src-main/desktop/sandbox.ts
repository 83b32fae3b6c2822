/**
 * What decides whether Chromium's sandbox can start on Linux, read by scripts/start.js before it
 * launches Electron. Chromium sandboxes its renderers with unprivileged user namespaces when the
 * kernel lets it, and otherwise with the SUID helper `chrome-sandbox`, which must then be owned
 * by root with mode 4755 — never the case in node_modules. Ubuntu 23.10+ lets AppArmor deny
 * those namespaces to programs without a profile, so Electron aborts with "The SUID sandbox
 * helper binary was found, but is not configured correctly" (electron/electron#42510).
 */
export interface SandboxFacts {
  platform: NodeJS.Platform
  /** The Electron executable. */
  electronPath: string
  /** `chrome-sandbox` beside it: owner and mode, or null where there is none. */
  helper: { path: string; uid: number; mode: number } | null
  /** `kernel.apparmor_restrict_unprivileged_userns` is 1 (Ubuntu 23.10 and later by default). */
  apparmorRestrictsUserns: boolean
  /** An AppArmor profile in /etc/apparmor.d names the Electron executable (remedy 2 below was applied). */
  apparmorProfileForElectron: boolean
  /** `kernel.unprivileged_userns_clone` or `user.max_user_namespaces` is 0 (older Debian, hardened kernels). */
  usernsDisabled: boolean
  /** The user asked for `--no-sandbox` themselves: their choice, not ours to second-guess. */
  noSandboxRequested: boolean
}

/** Why Electron would abort, and what to type to fix it. */
export interface SandboxProblem {
  /** One line: what is wrong. */
  summary: string
  /** The remedy, command by command, one string per printed line. */
  remedy: string[]
}

/** The AppArmor profile remedy 2 installs; its name is also what start.js looks for. */
export const APPARMOR_PROFILE = 'leasehold-electron'

/** A suid-root helper with mode 4755 is what Chromium accepts. */
function helperUsable(helper: NonNullable<SandboxFacts['helper']>): boolean {
  return helper.uid === 0 && (helper.mode & 0o7777) === 0o4755
}

/** Quotes a path for a POSIX shell. */
function shellQuote(path: string): string {
  return `'${path.replaceAll("'", `'\\''`)}'`
}

/**
 * Null when Electron's sandbox will start (or the question does not arise); otherwise the
 * problem and its exact remedy. Leasehold never adds `--no-sandbox` by itself: the remedy says
 * how to make the sandbox work, and names that switch only as the user's own, last choice.
 */
export function diagnoseSandbox(facts: SandboxFacts): SandboxProblem | null {
  if (facts.platform !== 'linux' || facts.noSandboxRequested || facts.helper === null) return null
  if (helperUsable(facts.helper)) return null
  const namespacesDenied = facts.usernsDisabled || (facts.apparmorRestrictsUserns && !facts.apparmorProfileForElectron)
  if (!namespacesDenied) return null
  const helper = shellQuote(facts.helper.path)
  const cause = facts.usernsDisabled
    ? 'this kernel does not allow unprivileged user namespaces'
    : 'AppArmor denies unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns=1)'
  const remedy = [
    'Fix it one of these ways, then run npm start again:',
    '  1. let the sandbox helper run as root (again after every npm install):',
    `       sudo chown root:root ${helper} && sudo chmod 4755 ${helper}`,
  ]
  if (facts.usernsDisabled) {
    remedy.push('  2. or allow unprivileged user namespaces:', '       sudo sysctl -w kernel.unprivileged_userns_clone=1')
  } else {
    remedy.push(
      '  2. or give this Electron an AppArmor profile that allows them:',
      `       printf 'abi <abi/4.0>,\\ninclude <tunables/global>\\nprofile ${APPARMOR_PROFILE} "%s" flags=(unconfined) {\\n  userns,\\n}\\n' ${shellQuote(facts.electronPath)} | sudo tee /etc/apparmor.d/${APPARMOR_PROFILE}`,
      `       sudo apparmor_parser -r /etc/apparmor.d/${APPARMOR_PROFILE}`,
    )
  }
  remedy.push('  (npm start -- --no-sandbox runs it without the sandbox, at your own risk: the page would lose its last line of defence.)')
  return {
    summary: `Electron's sandbox cannot start: ${cause}, and ${facts.helper.path} is not owned by root with mode 4755.`,
    remedy,
  }
}
