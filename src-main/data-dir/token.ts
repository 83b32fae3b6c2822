import { randomBytes } from 'node:crypto'
import { type Stats, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { TOKEN_FILE } from '../../src-shared/client-target'
import { MIN_TOKEN_CHARS, TOKEN_CHARS, TOKEN_CHARS_RULE } from '../../src-shared/limits'
import { othersMayWrite } from '../../src-shared/others-may-write'
import { readRegularFile } from '../../src-shared/regular-file'
import { HostStartError } from './lock'

/**
 * The token from --token, else `<dataDir>/token`, created (mode 0600) on first start. It is hex:
 * a base64url token starts with `-` one time in 64, and a command line then reads
 * `--token -Xy…` as a missing value. A token file another user owns or may write is refused
 * ({@link refuseSharedToken}).
 */
export function loadOrCreateToken(dataDir: string, given: string | null): string {
  if (given) return given
  const path = join(dataDir, TOKEN_FILE)
  const vet = (stats: Stats) => refuseSharedToken(path, stats)
  let stored: string | null = null
  try {
    stored = readRegularFile(path, vet).trim()
  } catch (error) {
    const e = error as NodeJS.ErrnoException
    if (error instanceof HostStartError) throw error
    if (e.code !== 'ENOENT') throw new Error(`cannot read the token file ${path} (${e.code === 'EISDIR' ? 'it is a directory, not a regular file' : e.message}): remove it to have one made, or give --token`)
  }
  if (stored) {
    // A token anyone could guess would open the API to every program on the machine.
    if (stored.length < MIN_TOKEN_CHARS) throw new Error(`the token in ${path} is shorter than ${MIN_TOKEN_CHARS} characters: write a longer one there, or delete the file to have one made`)
    if (!TOKEN_CHARS.test(stored)) throw new Error(`the token in ${path} ${TOKEN_CHARS_RULE}: write another there, or delete the file to have one made`)
    return stored
  }
  const token = randomBytes(32).toString('hex')
  if (stored === '') {
    // An empty file, as a crash right after its creation leaves one: a token of no use to anyone
    // (and an API no client could open), replaced by a new one.
    writeTokenFile(dataDir, token, { replace: true })
    return token
  }
  try {
    writeTokenFile(dataDir, token)
    return token
  } catch (error) {
    // Another host started at the same moment and wrote it first: use theirs.
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return readRegularFile(path, vet).trim()
    throw error
  }
}

/**
 * Refuses a token file another user owns or may write (src-shared/others-may-write.ts): its
 * token may be one they chose, and a host that served with it would take their requests as its
 * own. It is not made private here, nor replaced: the token in it may be given to clients already.
 */
function refuseSharedToken(path: string, stats: Stats): void {
  const shared = othersMayWrite(path, stats, '600')
  if (shared) {
    throw new HostStartError(
      `the token file ${path} ${shared.why}: another user may have written the token, and know it; remove the file to have a new token made, or, if you wrote the token, run \`${shared.fix}\``,
    )
  }
}

/**
 * Writes the data dir's token file (mode 0600). Only where none is, unless `replace`: a token
 * file there may hold a token given to clients already, or one another host wrote first (EEXIST).
 */
export function writeTokenFile(dataDir: string, token: string, { replace = false } = {}): void {
  writeFileSync(join(dataDir, TOKEN_FILE), `${token}\n`, { mode: 0o600, flag: replace ? 'w' : 'wx' })
}
