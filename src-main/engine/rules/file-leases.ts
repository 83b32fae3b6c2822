/** A file lease refused because another owner holds the file (verbs/files.ts): who holds it, and when the one retry is due. */
export interface Contention {
  file: string
  holder: { owner_id: string; job_id: string | null; acquired_at: number; age_s: number }
  denied_at: number
  retry_at: number
}
