import { isAbsolute, relative, sep } from 'node:path'
import type { WriteAllow } from '../src-shared/write-allow'
import { gatePath, shownPath } from './gate-path'
import { JobError } from './handler-api'

/**
 * Whether `file` is in `folder` or below it: both real paths ({@link writeRefusal}). A folder is
 * not in itself (a write to it fails EISDIR anyway); `/` holds everything.
 */
function isUnder(file: string, folder: string): boolean {
  const rest = relative(folder, file)
  return rest !== '' && !isAbsolute(rest) && rest.split(sep)[0] !== '..'
}

/**
 * Why `file.write` may not write `path` on this worker, as the job's error (`write_not_allowed`,
 * not retried: every attempt on this worker would meet it), or null when it may. `allow` is the
 * worker's `--write-allow` ({@link WriteAllow}: null allows anywhere), `setBy` where that is set,
 * named in the refusal as exec's refusal names its list.
 *
 * The file judged is the one the write will change, found by the rule the write and its gate
 * follow (gate-path.ts, after src-shared/linked-file.ts): a symbolic link at the end followed to
 * what it names, there yet or not, and every folder on the way taken at its real path. So
 * `ALLOWED/link` whose link leads to `~/.bashrc`, or `ALLOWED/sub/x` where `sub` is a symlinked
 * folder leading elsewhere, is judged where it lands. The allowed folders are taken at their real
 * paths by the same rule, so that a folder listed through a symlink (`/tmp` on macOS) still holds
 * what is written in it. The check runs before the write: a link changed between the two by
 * another user of an allowed folder could still lead the write elsewhere, so an allowed folder
 * should be one that only the worker's user may change.
 */
export async function writeRefusal(path: string, allow: WriteAllow, setBy: string): Promise<JobError | null> {
  if (allow === null) return null
  if (allow.length === 0) {
    return new JobError(`file.write: writes are off on this worker (${setBy}: none); a folder listed there allows the writes under it`, {
      code: 'write_not_allowed',
      retryable: false,
    })
  }
  const file = await gatePath(path, true)
  for (const folder of allow) {
    if (isUnder(file, await gatePath(folder, true))) return null
  }
  const lands = file === path ? '' : ` (it lands at ${shownPath(file)}, its links followed)`
  return new JobError(`file.write: ${shownPath(path)}${lands} is not under a folder this worker may write in (${setBy}: ${allow.join(',')})`, {
    code: 'write_not_allowed',
    retryable: false,
  })
}
