/**
 * How `npm install` gets better-sqlite3's addon (downloaded, else compiled with a job per core),
 * then the extension of the `leasehold-wal` VFS (compiled, or one line saying why not), and what it shows of Electron's download: one line of ours, never the installer's own
 * output (an 11-line stack where github.com cannot be reached), which goes to a log the line
 * names.
 */
import { spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, test, vi } from 'vitest'
import { ELECTRON_LOG, failureReason, installElectron, installSqlite, prebuildFailure, SQLITE_LOG } from '../../scripts/postinstall.js'
import { SQLITE_LEFT_OUT } from '../../scripts/rebuild-native.js'
import { buildWalVfs, walVfsCompileCommand } from '../../scripts/wal-vfs.js'

const STACK = `RequestError: getaddrinfo ENOTFOUND github.com
    at ClientRequest.<anonymous> (/x/node_modules/got/dist/source/core/index.js:970:111)
    at Object.onceWrapper (node:events:639:26)
    at GetAddrInfoReqWrap.onlookupall [as oncomplete] (node:dns:122:26)`

let root: string
beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'leasehold-postinstall-'))
})
afterEach(() => rmSync(root, { recursive: true, force: true }))

/** An installer that prints `output` on stderr and exits with `status`. */
function fakeInstaller(output: string, status: number): string {
  const script = join(root, 'install.js')
  writeFileSync(script, `process.stderr.write(${JSON.stringify(output)}); process.stdout.write('downloading…\\n'); process.exit(${status})\n`)
  return script
}

describe("Electron's download at npm install", () => {
  test('a failure is one line with its reason, the log that holds the whole error, and the command that retries', () => {
    const line = installElectron({ script: fakeInstaller(STACK, 1), root })
    expect(line).not.toContain('\n')
    expect(line).toContain("Electron's binary could not be installed (getaddrinfo ENOTFOUND github.com;")
    expect(line).toContain('electron-install.log')
    expect(line).toContain('Retry with: node node_modules/electron/install.js')
    expect(readFileSync(join(root, ELECTRON_LOG), 'utf8')).toBe(`${STACK}downloading…\n`)
  })

  test('a success says nothing, and its output is in the log too', () => {
    expect(installElectron({ script: fakeInstaller('', 0), root })).toBeNull()
    expect(readFileSync(join(root, ELECTRON_LOG), 'utf8')).toBe('downloading…\n')
  })

  test("the installer's output never reaches npm's: a process that runs it prints nothing of it", () => {
    const script = fakeInstaller(STACK, 1)
    const run = spawnSync(
      process.execPath,
      ['--input-type=module', '-e', `import { installElectron } from ${JSON.stringify(join(process.cwd(), 'scripts/postinstall.js'))}; installElectron({ script: ${JSON.stringify(script)}, root: ${JSON.stringify(root)} })`],
      { encoding: 'utf8' },
    )
    expect(run.status).toBe(0)
    expect(run.stdout + run.stderr).toBe('')
  })

  test('the reason is the error line of the output, else its last line', () => {
    expect(failureReason(STACK)).toBe('getaddrinfo ENOTFOUND github.com')
    expect(failureReason('HTTPError: Response code 404 (Not Found)\n  at x')).toBe('Response code 404 (Not Found)')
    expect(failureReason('checksum mismatch\n')).toBe('checksum mismatch')
    expect(failureReason('')).toBe('no output')
  })
})

describe("better-sqlite3's addon at npm install", () => {
  const ADDON = 'build/Release/better_sqlite3.node'
  let dir: string

  /**
   * A better-sqlite3 of the same shape: a package that loads once its addon file is there, a
   * prebuild-install that prints `prebuilt.output` and exits with `prebuilt.status` (laying the
   * addon down when it succeeds), and a node-gyp (the one npm names) that records its arguments
   * and lays the addon down unless told to fail.
   */
  function fakeSqlite(prebuilt: { output: string; status: number }, gyp: { status: number; ltoFails?: boolean } = { status: 0 }): void {
    dir = join(root, 'node_modules', 'better-sqlite3')
    mkdirSync(join(dir, 'node_modules', 'prebuild-install'), { recursive: true })
    writeFileSync(join(dir, 'package.json'), '{ "name": "better-sqlite3", "version": "12.11.1", "main": "index.js" }\n')
    writeFileSync(
      join(dir, 'index.js'),
      `require('fs').accessSync(require('path').join(__dirname, ${JSON.stringify(ADDON)})); module.exports = class { close() {} }\n`,
    )
    const layAddon = `require('fs').mkdirSync('build/Release', { recursive: true }); require('fs').writeFileSync(${JSON.stringify(ADDON)}, '')`
    writeFileSync(join(dir, 'node_modules', 'prebuild-install', 'package.json'), '{ "name": "prebuild-install" }\n')
    writeFileSync(
      join(dir, 'node_modules', 'prebuild-install', 'bin.js'),
      `process.stderr.write(${JSON.stringify(prebuilt.output)}); if (${prebuilt.status} === 0) { ${layAddon} }; process.exit(${prebuilt.status})\n`,
    )
    const gypScript = join(root, 'node-gyp.cjs') // CommonJS whatever package.json lies above the temporary folder
    writeFileSync(
      gypScript,
      `require('fs').writeFileSync(${JSON.stringify(join(root, 'gyp-args.json'))}, JSON.stringify(process.argv.slice(2))); require('fs').appendFileSync(${JSON.stringify(join(root, 'gyp-flags.txt'))}, JSON.stringify({ CFLAGS: process.env.CFLAGS, LDFLAGS: process.env.LDFLAGS }) + '\\n'); console.log('cc sqlite3.c'); const status = ${gyp.ltoFails === true} && process.env.CFLAGS.includes('-flto') ? 1 : ${gyp.status}; if (status === 0) { ${layAddon} }; process.exit(status)\n`,
    )
    vi.stubEnv('npm_config_node_gyp', gypScript)
  }
  afterEach(() => vi.unstubAllEnvs())

  const gypArgs = (): string[] | null => (existsSync(join(root, 'gyp-args.json')) ? JSON.parse(readFileSync(join(root, 'gyp-args.json'), 'utf8')) : null)
  /** The CFLAGS and LDFLAGS of each node-gyp run, in order. */
  const gypFlags = (): { CFLAGS?: string; LDFLAGS?: string }[] =>
    readFileSync(join(root, 'gyp-flags.txt'), 'utf8')
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { CFLAGS?: string; LDFLAGS?: string })
  const PLAIN_CFLAGS = ['-O2', ...SQLITE_LEFT_OUT.map((name) => `-U${name}`)].join(' ')
  const NO_GITHUB = 'prebuild-install info begin Prebuild-install version 7.1.3\nprebuild-install warn install getaddrinfo ENOTFOUND github.com\n'

  test('where no prebuilt addon can be downloaded it is compiled with a job per core, SQLite at -O2 without the unused modules, and the install shows one line of it', () => {
    fakeSqlite({ output: NO_GITHUB, status: 1 })
    const said: string[] = []
    expect(installSqlite({ dir, root, jobs: 2, ltoJobs: 0, say: (line) => said.push(line) })).toBe('compiled')
    expect(gypArgs()).toEqual(['rebuild', '--release', '--jobs=2'])
    expect(gypFlags()).toEqual([{ CFLAGS: PLAIN_CFLAGS }])
    expect(said).toHaveLength(1)
    expect(said[0]).not.toContain('\n')
    expect(said[0]).toContain('no prebuilt better-sqlite3 12.11.1 for Node')
    expect(said[0]).toContain('(getaddrinfo ENOTFOUND github.com)')
    expect(said[0]).toContain('compiling it with 2 jobs')
    const log = readFileSync(join(root, SQLITE_LOG), 'utf8')
    expect(log).toContain('ENOTFOUND github.com')
    expect(log).toContain('cc sqlite3.c')
  })

  test("where link-time optimisation may work, SQLite's code is generated in a job per core at the link, in one build", () => {
    fakeSqlite({ output: NO_GITHUB, status: 1 })
    expect(installSqlite({ dir, root, jobs: 2, ltoJobs: 2, say: () => {} })).toBe('compiled')
    expect(gypFlags()).toEqual([{ CFLAGS: `${PLAIN_CFLAGS} -flto`, LDFLAGS: '-flto=2' }])
  })

  test('a build with link-time optimisation that fails is followed by the plain compile, which the log says', () => {
    fakeSqlite({ output: NO_GITHUB, status: 1 }, { status: 0, ltoFails: true })
    const said: string[] = []
    expect(installSqlite({ dir, root, jobs: 2, ltoJobs: 2, say: (line) => said.push(line) })).toBe('compiled')
    expect(gypFlags()).toEqual([{ CFLAGS: `${PLAIN_CFLAGS} -flto`, LDFLAGS: '-flto=2' }, { CFLAGS: PLAIN_CFLAGS }])
    expect(said).toHaveLength(1)
    expect(readFileSync(join(root, SQLITE_LOG), 'utf8')).toContain('The build with link-time optimisation failed: compiling again without it.')
  })

  test('a prebuilt addon that downloads is used, and nothing is compiled or said', () => {
    fakeSqlite({ output: 'prebuild-install info install Successfully installed prebuilt binary!\n', status: 0 })
    const said: string[] = []
    expect(installSqlite({ dir, root, jobs: 2, say: (line) => said.push(line) })).toBe('downloaded')
    expect(gypArgs()).toBeNull()
    expect(said).toEqual([])
  })

  test('an addon that already loads is kept (npm install in an installed tree)', () => {
    fakeSqlite({ output: '', status: 0 })
    mkdirSync(join(dir, 'build', 'Release'), { recursive: true })
    writeFileSync(join(dir, ADDON), '')
    expect(installSqlite({ dir, root, jobs: 2, say: () => {} })).toBe('kept')
    expect(existsSync(join(root, SQLITE_LOG))).toBe(false)
  })

  test('a compile that fails is one line that says what it needs and where the whole output is', () => {
    fakeSqlite({ output: NO_GITHUB, status: 1 }, { status: 1 })
    let message = ''
    try {
      installSqlite({ dir, root, jobs: 2, ltoJobs: 2, say: () => {} })
    } catch (error) {
      message = (error as Error).message
    }
    expect(message).not.toContain('\n')
    expect(message).toMatch(/could not be compiled \(it needs Python 3, make and a C\+\+ toolchain.*better-sqlite3-install\.log; retry with: node scripts\/postinstall\.js$/)
  })

  test("prebuild-install's reason is its last warning", () => {
    expect(prebuildFailure(NO_GITHUB)).toBe('getaddrinfo ENOTFOUND github.com')
    expect(prebuildFailure('prebuild-install warn install No prebuilt binaries found (target=20.20.2 runtime=node arch=x64 libc= platform=linux)\n')).toMatch(/^No prebuilt binaries found/)
    expect(prebuildFailure('Error: spawn ENOENT\n')).toBe('spawn ENOENT')
  })
})

describe('the leasehold-wal extension at npm install', () => {
  test('is compiled from the one C file against the SQLite header better-sqlite3 ships, as a shared library', () => {
    expect(walVfsCompileCommand({ source: 'native/wal-vfs.c', output: 'out/native/wal-vfs.so', include: 'inc', cc: 'gcc', platform: 'linux' })).toEqual([
      'gcc', '-O2', '-fPIC', '-shared', '-I', 'inc', 'native/wal-vfs.c', '-o', 'out/native/wal-vfs.so',
    ])
    expect(walVfsCompileCommand({ source: 's.c', output: 'o.so', include: 'i', cc: 'ccache clang', platform: 'darwin' })).toEqual(['ccache', 'clang', '-O2', '-fPIC', '-dynamiclib', '-I', 'i', 's.c', '-o', 'o.so'])
  })

  test('without a compiler it is one line naming the compiler and why, and leaves no file', () => {
    const output = join(root, 'wal-vfs.so')
    expect(() => buildWalVfs({ output, cc: 'no-such-cc' })).toThrow(/^no-such-cc could not compile native\/wal-vfs\.c \(.*ENOENT.*\)$/)
    expect(existsSync(output)).toBe(false)
  })

  test('on Windows it is not tried: there is no unix-excl VFS to stack on', () => {
    expect(() => buildWalVfs({ output: join(root, 'wal-vfs.so'), platform: 'win32' })).toThrow('Windows has no unix-excl VFS for leasehold-wal to stack on')
  })
})
