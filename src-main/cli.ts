import { ConfigError, runClient, watchClosedOutput } from '../src-shared/command-line'
import { dashboardLink } from './data-dir/dashboard-link'
import { BACKUP_HELP, backupCommand } from './commands/backup'
import { CHECK_HELP, checkCommand } from './commands/check'
import { JOBS_HELP, jobsCommand } from './commands/jobs'
import { SCHEDULE_HELP, scheduleCommand } from './commands/schedule'
import { BLOCKERS_HELP, blockersCommand } from './commands/blockers'
import { QUEUE_HELP, queueCommand } from './commands/queue'
import { STATUS_HELP, statusCommand } from './commands/status'
import { SUBMIT_HELP, submitCommand } from './commands/submit'
import { TOKEN_HELP, tokenCommand } from './commands/token'
import { VERSION } from './version'

const USAGE = `Usage: leasehold <command> [flags]

Leasehold is a local job scheduler: jobs with a priority and a cost in capacity units, workers
that hold leases on that capacity and keep them alive with heartbeats, and a busy rating that
makes background work yield to the person at the desk.

Commands:
  serve       run the host without a window (HTTP API + scheduler)
  worker      run jobs for a host over HTTP, or over Redis only (--redis)
  submit      submit a job (--at/--in delay it); --wait follows it to its end; --each FILE: one job a line
  jobs        list jobs (--state, --dead-letter, --limit, --json); show, cancel, retry or run-now one
  schedule    recurring schedules: add, edit, list, pause, resume, rm (cron, time zones)
  queue       list the queues, pause or resume one (queue list | pause Q | resume Q)
  blockers    jobs halted on a held file: list them, answer one (resolve ID retry|force_release|cancel)
  status      capacity, busy rating, leases, workers and open blockers
  check       check the integrity of the database (runs while the host serves)
  backup      copy the database while the host serves, into <data-dir>/backups
  token       scoped tokens: create --scope worker|admin, list, revoke ID
  help        show this help, or the help of a command: leasehold help serve

Flags:
  -h, --help     show help
  -v, --version  show the version

Run 'leasehold <command> --help' for a command's flags. The client commands (worker, submit,
jobs, queue, blockers, schedule, status, check, backup) find the host through --url/--token,
LEASEHOLD_URL/LEASEHOLD_TOKEN, or the data directory of a host running on this machine, and
wait 30 s for each answer, 10 minutes for a bulk action's (jobs retry --dead-letter); when set,
LEASEHOLD_TIMEOUT_S is the wait for both.

Exit status: 0 done, 1 failed (the host refused or could not be reached), 2 a usage error (a bad
command, flag or value, the host's refusal of a value as invalid too; 'leasehold' alone prints
this help on stderr and exits 2, as a missing command is one), 124 when 'submit --wait
--wait-timeout' stopped waiting before the job ended (as timeout(1) exits) or 'jobs retry
--dead-letter' before its answer came (the host carries the retry on), 141 when a command's
reader closed its output before all of it was written (… | head; an output that fits in the
pipe's buffer is written whole, and exits 0), as for any program a closed pipe ends. An output
that cannot be written otherwise (a full disk) is one line on stderr, naming what was done (the
job submitted), and exit 1. Stderr is for information: one that cannot be written changes
neither what a command does nor its exit status.`

/** Runs the command line; resolves to the exit code (a running `serve` resolves when it stops). */
export async function main(argv: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const [command, ...rest] = argv
  // serve keeps serving when nobody reads what it prints; any other command ends quietly.
  watchClosedOutput(command === 'serve' ? 'ignore' : 'end')
  if (command === undefined) {
    // No command is a usage error (as git and npm have it): the help goes where errors go.
    console.error(USAGE)
    return 2
  }
  // The host's config (and zod with it) is loaded for `serve` only, as the host is.
  const helps: Record<string, () => string | Promise<string>> = {
    serve: async () => (await import('./config')).serveHelp(env),
    submit: () => SUBMIT_HELP,
    jobs: () => JOBS_HELP,
    schedule: () => SCHEDULE_HELP,
    queue: () => QUEUE_HELP,
    blockers: () => BLOCKERS_HELP,
    status: () => STATUS_HELP,
    check: () => CHECK_HELP,
    backup: () => BACKUP_HELP,
    token: () => TOKEN_HELP,
    help: () => USAGE,
  }
  if (command === '-h' || command === '--help') {
    // `-h serve` asks for serve's help, as `serve -h` and `help serve` do; anything else after it, the usage.
    const topic = rest[0] !== undefined && helps[rest[0]] ? rest[0] : 'help'
    console.log(await helps[topic]!())
    return 0
  }
  if (command === 'help') {
    // `help --help` asks how to use help: the usage says it.
    const topic = rest[0] === '-h' || rest[0] === '--help' ? undefined : rest[0]
    if (topic !== undefined && !helps[topic]) {
      console.error(`leasehold: no help for "${topic}": it is not a command (try leasehold --help)`)
      return 2
    }
    console.log(topic === undefined ? USAGE : await helps[topic]!())
    return 0
  }
  if (helps[command] && (rest.includes('-h') || rest.includes('--help'))) {
    console.log(await helps[command]!())
    return 0
  }
  if (command === '-v' || command === '--version') {
    console.log(VERSION)
    return 0
  }
  if (command === 'serve') return serve(rest, env)
  if (command === 'submit') return runClient(() => submitCommand(rest, env))
  if (command === 'jobs') return runClient(() => jobsCommand(rest, env))
  if (command === 'schedule') return runClient(() => scheduleCommand(rest, env))
  if (command === 'queue') return runClient(() => queueCommand(rest, env))
  if (command === 'blockers') return runClient(() => blockersCommand(rest, env))
  if (command === 'status') return runClient(() => statusCommand(rest, env))
  if (command === 'check') return runClient(() => checkCommand(rest, env))
  if (command === 'backup') return runClient(() => backupCommand(rest, env))
  if (command === 'token') return runClient(() => tokenCommand(rest, env))
  console.error(`leasehold: unknown command "${command}" (try leasehold --help)`)
  return 2
}

async function serve(argv: string[], env: NodeJS.ProcessEnv): Promise<number> {
  // The host (Koa, SQLite, drizzle, the engine) is loaded for `serve` only: the client commands
  // start in about half the time without it.
  const [{ startHost }, { DatabaseOpenError }, { HostStartError }, { parseServeArgs, serveVariableWarnings }] = await Promise.all([
    import('./host'),
    import('./db/open'),
    import('./data-dir/lock'),
    import('./config'),
  ])
  let host
  let config
  try {
    config = parseServeArgs(argv, env)
    for (const line of serveVariableWarnings(env)) console.error(line)
    host = await startHost(config)
  } catch (error) {
    if (error instanceof DatabaseOpenError || error instanceof HostStartError) {
      console.error(`leasehold: could not start: ${error.message}`)
      return 1
    }
    return reportStartError(error)
  }
  const running = host
  // The signal handlers go in before the listening line: a script that reads it may stop the
  // host at once, and a SIGTERM with no handler yet would kill it without closing the database.
  const stopped = new Promise<number>((resolve) => {
    let stopping = false
    const shutdown = (signal: string) => {
      // A signal again while the host stops: a SIGTERM is ignored (`timeout` and process managers
      // may send one to the process and to its group, moments apart), a second Ctrl-C stops at
      // once, as in the desktop app; nothing is lost either way (the next start recovers).
      if (stopping) {
        if (signal !== 'SIGINT') return console.error(`leasehold: ${signal} again: already stopping`)
        console.error('leasehold: SIGINT again: stopping at once')
        process.exit(130)
      }
      stopping = true
      console.error(`leasehold: ${signal}: finishing requests in flight and closing the database`)
      running.stop().then(
        () => resolve(0),
        (error: unknown) => {
          console.error(`leasehold: could not stop cleanly: ${(error as Error).message}`)
          resolve(1)
        },
      )
    }
    // SIGHUP is what closing its terminal sends (to the whole foreground group, and again from
    // the shell): a stop like SIGTERM's, not a death that leaves the database unclosed and the
    // attempts of its local workers charged. Those workers die of no such signal from the group,
    // nor of a SIGTERM to it (src-worker/main.ts): the host stops them, draining.
    for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) process.on(signal, () => shutdown(signal))
  })
  // The first line is what scripts wait for; the link is how a person gets into the dashboard.
  console.log(`leasehold listening on ${host.url}`)
  console.log(`  data dir   ${config.dataDir}`)
  console.log(`  dashboard  ${dashboardLink(host.url, host.token)}`)
  return stopped
}

/** One line for what a user can fix (exit 2), or the error for what they cannot (exit 1). */
function reportStartError(error: unknown): number {
  if (error instanceof ConfigError) {
    console.error(`leasehold: ${error.message}`)
    return 2
  }
  const e = error as NodeJS.ErrnoException & { hostname?: string }
  // A --host (LEASEHOLD_HOST) that names no address: a bad value, said as one (exit 2).
  if (e.syscall === 'getaddrinfo') {
    console.error(`leasehold: --host (LEASEHOLD_HOST) ${JSON.stringify(e.hostname ?? '')} is no address or name of this machine (${e.code}): give an address to listen on, such as 127.0.0.1 or 0.0.0.0`)
    return 2
  }
  // Every failure to start reads "could not start: …" (docs/configuration.md), then why.
  if (e.code === 'EADDRINUSE') {
    console.error(`leasehold: could not start: the port is already in use (${e.message}); pick another with --port`)
    return 1
  }
  if (e.syscall === 'listen' && (e.code === 'EACCES' || e.code === 'EADDRNOTAVAIL')) {
    console.error(`leasehold: could not start: cannot listen there (${e.message})`)
    return 1
  }
  console.error(`leasehold: could not start: ${e.message}`)
  return 1
}
