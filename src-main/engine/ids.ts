import { v7 } from 'uuid'

/**
 * A new id for a job, lease, attempt, stream message, file lease or blocker: a UUID version 7,
 * which starts with the time. Ids made later sort later, so each id index grows at its end: an
 * insert dirties the one hot last page instead of a random page of a large index, which is what
 * a commit costs on this storage (one WAL frame per dirty page).
 */
export const newId = (): string => v7()
