/** The operator's three answers to a blocker halt (verbs/blockers.ts applies them). */
export const RESOLUTIONS = ['retry', 'force_release', 'cancel'] as const
export type Resolution = (typeof RESOLUTIONS)[number]
