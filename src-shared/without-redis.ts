/**
 * Whose jobs run while the host does not use Redis (it does not answer, refuses what the host
 * sends, or another host took the prefix): local workers and workers over HTTP go on; remote
 * workers over Redis hear nothing from the host then, and run nothing.
 * - `all`: no worker is a remote one over Redis (or no worker is known): jobs still run;
 * - `none`: every worker is a remote one over Redis: nothing runs meanwhile;
 * - `some`: the jobs of local and HTTP workers run, those of remote workers over Redis do not.
 */
export type StillRunWithoutRedis = 'all' | 'none' | 'some'

/** Which of these workers' jobs still run while Redis is not used: `leasehold status` and the dashboard's Redis banner say it from this. */
export function stillRunWithoutRedis(workers: readonly { kind: string }[]): StillRunWithoutRedis {
  const remote = workers.filter((w) => w.kind === 'redis').length
  if (remote === 0) return 'all'
  return remote === workers.length ? 'none' : 'some'
}
