import { isAbsolute } from 'node:path'
import { shownPath } from '../gate-path'
import { type Handler, JobError } from '../handler-api'
import type { WriteAllow } from '../../src-shared/write-allow'
import { writeRefusal } from '../write-allow'

/**
 * The file system's refusals that a later attempt meets the same way: a folder on the path that
 * does not exist or is a file, a path that names a folder or is too long, no permission. Each
 * fails the job at once, naming the path; a full disk, a busy file or an I/O error is retried,
 * as anything may mend those between attempts (a write that fails leaves the file as it was:
 * regular-file.ts, so the retry writes the content once).
 */
const LASTING = new Set(['ENOENT', 'ENOTDIR', 'EISDIR', 'EACCES', 'EPERM', 'EROFS', 'ENAMETOOLONG', 'ELOOP'])

/**
 * `file.write {path, content, mode: write|append}`: writes through the file-lease gate, to a
 * regular file only (the gated `files` API refuses a FIFO, a socket or a device). The path is
 * absolute: a relative one would land in whatever folder the worker was started from, which the
 * submitter neither chose nor sees, so it is refused as the payload's fault, not retried. The
 * file it lands in must be under a folder of `allow`, the worker's `--write-allow` (null:
 * anywhere its user may write), or the job fails as `write_not_allowed`, naming `setBy`, where
 * that list is set (write-allow.ts).
 */
export const fileWriteHandler = (allow: WriteAllow, setBy: string): Handler => ({
  type: 'file.write',
  async run({ payload, files }) {
    const { path, content, mode = 'write' } = (payload ?? {}) as { path?: unknown; content?: unknown; mode?: unknown }
    if (typeof path !== 'string' || typeof content !== 'string' || (mode !== 'write' && mode !== 'append')) {
      throw new JobError('file.write: payload must be {path: string, content: string, mode?: "write"|"append"}', {
        code: 'invalid_payload',
        retryable: false,
      })
    }
    if (!isAbsolute(path)) {
      throw new JobError(`file.write: path must be absolute, not "${shownPath(path)}" (a relative path would be taken from the worker's working folder)`, {
        code: 'invalid_payload',
        retryable: false,
      })
    }
    try {
      const refusal = await writeRefusal(path, allow, setBy)
      if (refusal) throw refusal
      if (mode === 'append') await files.appendFile(path, content)
      else await files.writeFile(path, content)
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code
      if (typeof code === 'string' && LASTING.has(code)) throw new JobError(`file.write: ${(error as Error).message}`, { code, retryable: false })
      throw error
    }
    return { path, bytes: Buffer.byteLength(content), mode }
  },
})
