/**
 * LEASEHOLD_WAL_VFS: whether the database is opened through the `leasehold-wal` VFS
 * (connection.ts). Unset or on: through it where it is built; off: never. Any other value is
 * refused at start (config.ts), not read as on: a user who wrote `disable` meant off.
 */
export const WAL_VFS_VARIABLE = 'LEASEHOLD_WAL_VFS'

const OFF = /^(off|0|false|no)$/i
const ON = /^(on|1|true|yes)$/i

/** Whether the variable's value turns the VFS off. */
export const walVfsOff = (value: string | undefined): boolean => OFF.test(value ?? '')

/** Why a value of the variable is refused, or null for one it knows (or none). */
export function walVfsSettingProblem(value: string | undefined): string | null {
  if (value === undefined || value === '' || OFF.test(value) || ON.test(value)) return null
  return `must be on or off (also 1/0, true/false, yes/no)`
}
