/** The operator's three answers to a blocker halt (verbs/blockers.ts applies them). */
export const RESOLUTIONS = ['retry', 'force_release', 'cancel'] as const
export type Resolution = (typeof RESOLUTIONS)[number]

/** Who answered a blocker, when the answer (or the cancel that closed it) names nobody. */
export const answeredBy = (by: string | null | undefined): string => by ?? 'operator'
