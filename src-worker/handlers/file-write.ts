import { type Handler, JobError } from '../handler-api'

/** `file.write {path, content, mode: write|append}`: writes through the file-lease gate. */
export const fileWrite: Handler = {
  type: 'file.write',
  async run({ payload, files }) {
    const { path, content, mode = 'write' } = (payload ?? {}) as { path?: unknown; content?: unknown; mode?: unknown }
    if (typeof path !== 'string' || typeof content !== 'string' || (mode !== 'write' && mode !== 'append')) {
      throw new JobError('file.write: payload must be {path: string, content: string, mode?: "write"|"append"}', {
        code: 'invalid_payload',
        retryable: false,
      })
    }
    if (mode === 'append') await files.appendFile(path, content)
    else await files.writeFile(path, content)
    return { path, bytes: Buffer.byteLength(content), mode }
  },
}
