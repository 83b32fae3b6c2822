import type { StoreContext } from './context'

/** What the database file holds, in SQLite's pages. */
export interface StorageFigures {
  page_size: number
  /** Pages in the file, free ones included. */
  page_count: number
  /** Free pages: space of deleted rows, reused before the file grows. */
  freelist_count: number
  auto_vacuum: 'none' | 'full' | 'incremental'
}

const AUTO_VACUUM_MODES = ['none', 'full', 'incremental'] as const

export function storageFigures(ctx: StoreContext): StorageFigures {
  const pragma = (name: string) => ctx.one<Record<string, number>>(`PRAGMA ${name}`)![name]!
  return {
    page_size: pragma('page_size'),
    page_count: pragma('page_count'),
    freelist_count: pragma('freelist_count'),
    auto_vacuum: AUTO_VACUUM_MODES[pragma('auto_vacuum')] ?? 'none',
  }
}

/** Free pages always kept for reuse, at least: returning them only for the file to grow again is wasted writing. */
const MIN_RESERVE_PAGES = 1024

/**
 * How many free pages to give back to the file system: those beyond a reserve of a tenth of the
 * file (at least {@link MIN_RESERVE_PAGES}), which the jobs of the next minutes reuse. A file
 * that is not in incremental auto-vacuum gives none back (src-main/db/open.ts converts it).
 */
export function surplusFreePages(figures: StorageFigures): number {
  if (figures.auto_vacuum !== 'incremental') return 0
  const reserve = Math.max(MIN_RESERVE_PAGES, Math.floor(figures.page_count / 10))
  return Math.max(0, figures.freelist_count - reserve)
}

/**
 * One step of giving space back: moves up to `maxPages` pages from the file's end into free
 * pages and truncates it (`PRAGMA incremental_vacuum`), in one transaction of its own. Returns
 * how many pages went back; 0 when none are surplus.
 */
export function returnFreePages(ctx: StoreContext, maxPages: number): number {
  const pages = Math.min(maxPages, surplusFreePages(storageFigures(ctx)))
  if (pages <= 0) return 0
  // exec, not a prepared statement's run(): each step of this pragma frees one page, and run()
  // takes one step; exec runs it to the end.
  ctx.transact(() => ctx.db.exec(`PRAGMA incremental_vacuum(${Math.floor(pages)})`))
  return pages
}

/**
 * Copies the frames the WAL holds into the database file, without waiting for anyone (PASSIVE),
 * outside every transaction (an open group commits first). Retention calls it after each of its
 * steps: the pages a step deleted are all distinct, and left to the automatic checkpoint
 * (src-main/db/open.ts, every 10,000 pages) they would make one commit of the host's write 40 MB
 * at once, a pause of a few hundred milliseconds; copied step by step they cost a few each.
 */
export function checkpointWal(ctx: StoreContext): void {
  if (ctx.insideOperation) throw new Error('checkpointWal runs outside every operation')
  ctx.flush()
  ctx.db.pragma('wal_checkpoint(PASSIVE)')
}
