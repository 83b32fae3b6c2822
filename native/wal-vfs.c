/*
** leasehold-wal: a SQLite VFS stacked on `unix-excl` that writes each commit to the write-ahead
** log in one system call.
**
** SQLite writes a frame of the log as two writes, its 24-byte header and then its page, so a
** commit of four pages costs eight `pwrite`s. This VFS gathers the writes that follow each other
** in the log into one buffer and writes the buffer at once when the commit's last page arrives.
** What reaches the file, and in what order, is what SQLite asked for; only the number of calls
** changes. A commit is durable when SQLite's sync of the log returns, and the buffer is always
** written before any sync, so durability is as without it.
**
** The buffer is written:
**   - after the page of a commit frame (the frame whose header carries the database's size in
**     pages, which only a commit's last frame does): the common case, once per commit;
**   - before any read, sync, size query, truncation, file control or close of the log, and
**     before a write that does not follow the buffer;
**   - before SQLite touches the log's index (a memory barrier or a change of the index's locks,
**     called on the database file of the same connection), which is how a commit becomes
**     visible to the process's other connections. The commit frame above has emptied the buffer
**     by then; this holds whatever else SQLite might do before it publishes.
** A write that directly follows a read of the log goes through at once: that is SQLite writing
** the checksums of a commit's frames again, header by header after reading each frame (a commit
** that wrote some of its pages twice), and the last of those headers has no page after it.
** So no connection ever reads a frame that is still in the buffer, and no sync covers less than
** SQLite asked it to. An error of the delayed write is returned by the call that made it, which
** is part of the same commit: the commit fails, as it would have without the buffer. (Only the
** barrier cannot return an error: the log's next call returns it.)
**
** Every other file, and every other call, goes to `unix-excl` unchanged.
**
** Loaded as a SQLite extension (its entry point registers the VFS, not as the default, and keeps
** the library loaded); a connection picks it with the URI parameter `vfs=leasehold-wal`.
*/
#include "sqlite3ext.h"
SQLITE_EXTENSION_INIT1

#include <string.h>

#define WAL_VFS_NAME "leasehold-wal"
#define BASE_VFS_NAME "unix-excl"
#define FRAME_HEADER_SIZE 24
/* A commit larger than this is written in pieces of this size: the unix VFS writes at most
   128 KiB - 1 bytes a call (it masks the size to 17 bits), so the buffer stays under that. */
#define BUFFER_SIZE (120 * 1024)

typedef struct WalFile WalFile;
typedef struct DbFile DbFile;

/* Both kinds of file begin with SQLite's part and the `unix-excl` file they forward to (REAL). */

/* The database file: forwards everything, and holds the log of the same connection. */
struct DbFile {
  sqlite3_file base;
  sqlite3_file *real;
  WalFile *wal;
};

/* The log: forwards everything except the writes it gathers. */
struct WalFile {
  sqlite3_file base;
  sqlite3_file *real;
  DbFile *db;
  unsigned char *buffer;
  int size;                    /* bytes gathered */
  sqlite3_int64 offset;        /* where buffer[0] goes in the file */
  sqlite3_int64 commitPageAt;  /* where the page of the commit frame whose header was gathered goes, or -1 */
  int afterRead;               /* the last call was a read: SQLite is rewriting frames' checksums */
  int deferredError;           /* a write the database file's barrier made failed: the log's next call returns it */
};

static sqlite3_vfs walVfs;
#define BASE_VFS ((sqlite3_vfs *)walVfs.pAppData)
#define REAL(file) (((DbFile *)(file))->real)

/* ---- the log ---- */

static int walFlush(WalFile *p) {
  int rc = p->deferredError;
  p->deferredError = SQLITE_OK;
  if (rc != SQLITE_OK) {
    p->size = 0;
    p->commitPageAt = -1;
    return rc;
  }
  if (p->size > 0) rc = p->real->pMethods->xWrite(p->real, p->buffer, p->size, p->offset);
  p->size = 0;
  p->commitPageAt = -1;
  return rc;
}

static int walClose(sqlite3_file *file) {
  WalFile *p = (WalFile *)file;
  int rc = walFlush(p);
  int closed = p->real->pMethods->xClose(p->real);
  if (p->db) p->db->wal = 0;
  sqlite3_free(p->buffer);
  return rc != SQLITE_OK ? rc : closed;
}

static int walRead(sqlite3_file *file, void *data, int amount, sqlite3_int64 offset) {
  WalFile *p = (WalFile *)file;
  int rc = walFlush(p);
  p->afterRead = 1;
  return rc != SQLITE_OK ? rc : p->real->pMethods->xRead(p->real, data, amount, offset);
}

/* Whether `data` is a frame header that marks the end of a commit (its size in pages is not 0). */
static int isCommitHeader(const void *data, int amount) {
  const unsigned char *h = data;
  return amount == FRAME_HEADER_SIZE && (h[4] | h[5] | h[6] | h[7]) != 0;
}

static int walWrite(sqlite3_file *file, const void *data, int amount, sqlite3_int64 offset) {
  WalFile *p = (WalFile *)file;
  int afterRead = p->afterRead;
  int rc;
  p->afterRead = 0;
  if (afterRead) {
    /* A frame's header written again after reading the frame (SQLite recomputing the checksums
       of a commit that overwrote its own frames): nothing follows it that it could share a
       write with, and it may be the commit's last. */
    rc = walFlush(p);
    if (rc == SQLITE_OK) rc = p->real->pMethods->xWrite(p->real, data, amount, offset);
    if (rc == SQLITE_OK && isCommitHeader(data, amount)) p->commitPageAt = offset + FRAME_HEADER_SIZE;
    return rc;
  }
  if (p->size > 0 && offset != p->offset + p->size) {
    rc = walFlush(p);
    if (rc != SQLITE_OK) return rc;
  }
  if (p->size + amount > BUFFER_SIZE) {
    rc = walFlush(p);
    if (rc != SQLITE_OK) return rc;
    if (amount > BUFFER_SIZE) return p->real->pMethods->xWrite(p->real, data, amount, offset);
  }
  if (!p->buffer) {
    p->buffer = sqlite3_malloc(BUFFER_SIZE);
    /* No memory for a buffer: this log's writes go through as SQLite makes them. */
    if (!p->buffer) return p->real->pMethods->xWrite(p->real, data, amount, offset);
  }
  if (p->size == 0) p->offset = offset;
  memcpy(p->buffer + p->size, data, amount);
  p->size += amount;

  if (offset == p->commitPageAt) return walFlush(p);
  if (isCommitHeader(data, amount)) p->commitPageAt = offset + FRAME_HEADER_SIZE;
  return SQLITE_OK;
}

static int walTruncate(sqlite3_file *file, sqlite3_int64 size) {
  WalFile *p = (WalFile *)file;
  int rc = walFlush(p);
  return rc != SQLITE_OK ? rc : p->real->pMethods->xTruncate(p->real, size);
}

static int walSync(sqlite3_file *file, int flags) {
  WalFile *p = (WalFile *)file;
  int rc = walFlush(p);
  return rc != SQLITE_OK ? rc : p->real->pMethods->xSync(p->real, flags);
}

static int walFileSize(sqlite3_file *file, sqlite3_int64 *size) {
  WalFile *p = (WalFile *)file;
  int rc = walFlush(p);
  return rc != SQLITE_OK ? rc : p->real->pMethods->xFileSize(p->real, size);
}

static int walFileControl(sqlite3_file *file, int op, void *arg) {
  WalFile *p = (WalFile *)file;
  int rc = walFlush(p);
  return rc != SQLITE_OK ? rc : p->real->pMethods->xFileControl(p->real, op, arg);
}

static int walFetch(sqlite3_file *file, sqlite3_int64 offset, int amount, void **out) {
  WalFile *p = (WalFile *)file;
  int rc = walFlush(p);
  return rc != SQLITE_OK ? rc : p->real->pMethods->xFetch(p->real, offset, amount, out);
}

/* ---- calls forwarded as they are, for both kinds of file ---- */

static int fwdLock(sqlite3_file *f, int lock) { return REAL(f)->pMethods->xLock(REAL(f), lock); }
static int fwdUnlock(sqlite3_file *f, int lock) { return REAL(f)->pMethods->xUnlock(REAL(f), lock); }
static int fwdCheckReservedLock(sqlite3_file *f, int *out) { return REAL(f)->pMethods->xCheckReservedLock(REAL(f), out); }
static int fwdSectorSize(sqlite3_file *f) { return REAL(f)->pMethods->xSectorSize(REAL(f)); }
static int fwdDeviceCharacteristics(sqlite3_file *f) { return REAL(f)->pMethods->xDeviceCharacteristics(REAL(f)); }
static int fwdShmMap(sqlite3_file *f, int region, int size, int extend, void volatile **out) {
  return REAL(f)->pMethods->xShmMap(REAL(f), region, size, extend, out);
}
static int fwdShmLock(sqlite3_file *f, int offset, int n, int flags) { return REAL(f)->pMethods->xShmLock(REAL(f), offset, n, flags); }
static void fwdShmBarrier(sqlite3_file *f) { REAL(f)->pMethods->xShmBarrier(REAL(f)); }
static int fwdShmUnmap(sqlite3_file *f, int deleteFlag) { return REAL(f)->pMethods->xShmUnmap(REAL(f), deleteFlag); }
static int fwdUnfetch(sqlite3_file *f, sqlite3_int64 offset, void *page) { return REAL(f)->pMethods->xUnfetch(REAL(f), offset, page); }

/* ---- the database file ---- */

/* Writes the gathered frames of this connection's log, if any: before the log's index changes hands. */
static int dbFlushLog(sqlite3_file *file) {
  DbFile *p = (DbFile *)file;
  return p->wal ? walFlush(p->wal) : SQLITE_OK;
}

static int dbClose(sqlite3_file *file) {
  DbFile *p = (DbFile *)file;
  int rc = dbFlushLog(file);
  int closed;
  if (p->wal) p->wal->db = 0;
  closed = p->real->pMethods->xClose(p->real);
  return rc != SQLITE_OK ? rc : closed;
}
static int dbRead(sqlite3_file *f, void *data, int amount, sqlite3_int64 offset) { return REAL(f)->pMethods->xRead(REAL(f), data, amount, offset); }
static int dbWrite(sqlite3_file *f, const void *data, int amount, sqlite3_int64 offset) { return REAL(f)->pMethods->xWrite(REAL(f), data, amount, offset); }
static int dbTruncate(sqlite3_file *f, sqlite3_int64 size) { return REAL(f)->pMethods->xTruncate(REAL(f), size); }
static int dbSync(sqlite3_file *f, int flags) { return REAL(f)->pMethods->xSync(REAL(f), flags); }
static int dbFileSize(sqlite3_file *f, sqlite3_int64 *size) { return REAL(f)->pMethods->xFileSize(REAL(f), size); }
static int dbFileControl(sqlite3_file *f, int op, void *arg) { return REAL(f)->pMethods->xFileControl(REAL(f), op, arg); }
static int dbFetch(sqlite3_file *f, sqlite3_int64 offset, int amount, void **out) { return REAL(f)->pMethods->xFetch(REAL(f), offset, amount, out); }
static int dbShmLock(sqlite3_file *f, int offset, int n, int flags) {
  int rc = dbFlushLog(f);
  return rc != SQLITE_OK ? rc : REAL(f)->pMethods->xShmLock(REAL(f), offset, n, flags);
}
static void dbShmBarrier(sqlite3_file *f) {
  /* Every commit's frames are written by the call that wrote its last page, so the buffer is
     empty here; this is the last line of defence. A barrier cannot fail: an error is returned by
     the log's next call. */
  DbFile *p = (DbFile *)f;
  if (p->wal && p->wal->size > 0) {
    int rc = walFlush(p->wal);
    if (rc != SQLITE_OK) p->wal->deferredError = rc;
  }
  REAL(f)->pMethods->xShmBarrier(REAL(f));
}
static int dbShmUnmap(sqlite3_file *f, int deleteFlag) {
  int rc = dbFlushLog(f);
  return rc != SQLITE_OK ? rc : REAL(f)->pMethods->xShmUnmap(REAL(f), deleteFlag);
}

static const sqlite3_io_methods dbMethods = {
  3, dbClose, dbRead, dbWrite, dbTruncate, dbSync, dbFileSize, fwdLock, fwdUnlock, fwdCheckReservedLock,
  dbFileControl, fwdSectorSize, fwdDeviceCharacteristics, fwdShmMap, dbShmLock, dbShmBarrier, dbShmUnmap,
  dbFetch, fwdUnfetch,
};

static const sqlite3_io_methods walMethods = {
  3, walClose, walRead, walWrite, walTruncate, walSync, walFileSize, fwdLock, fwdUnlock, fwdCheckReservedLock,
  walFileControl, fwdSectorSize, fwdDeviceCharacteristics, fwdShmMap, fwdShmLock, fwdShmBarrier, fwdShmUnmap,
  walFetch, fwdUnfetch,
};

/* ---- the VFS ---- */

static int vfsOpen(sqlite3_vfs *vfs, const char *name, sqlite3_file *file, int flags, int *outFlags) {
  int rc;
  (void)vfs;
  if (!(flags & (SQLITE_OPEN_MAIN_DB | SQLITE_OPEN_WAL)) || name == 0) {
    /* Journals, temporary files: the base VFS's own file, in the space SQLite allocated. */
    return BASE_VFS->xOpen(BASE_VFS, name, file, flags, outFlags);
  }
  if (flags & SQLITE_OPEN_MAIN_DB) {
    DbFile *p = (DbFile *)file;
    memset(p, 0, sizeof(*p));
    p->real = (sqlite3_file *)&p[1];
    rc = BASE_VFS->xOpen(BASE_VFS, name, p->real, flags, outFlags);
    if (rc == SQLITE_OK) p->base.pMethods = &dbMethods;
    return rc;
  } else {
    WalFile *p = (WalFile *)file;
    memset(p, 0, sizeof(*p));
    p->real = (sqlite3_file *)&p[1];
    p->commitPageAt = -1;
    rc = BASE_VFS->xOpen(BASE_VFS, name, p->real, flags, outFlags);
    if (rc != SQLITE_OK) return rc;
    p->base.pMethods = &walMethods;
    {
      sqlite3_file *db = sqlite3_database_file_object(name);
      if (db && db->pMethods == &dbMethods) {
        p->db = (DbFile *)db;
        p->db->wal = p;
      }
    }
    return SQLITE_OK;
  }
}

static int vfsDelete(sqlite3_vfs *v, const char *name, int sync) { (void)v; return BASE_VFS->xDelete(BASE_VFS, name, sync); }
static int vfsAccess(sqlite3_vfs *v, const char *name, int flags, int *out) { (void)v; return BASE_VFS->xAccess(BASE_VFS, name, flags, out); }
static int vfsFullPathname(sqlite3_vfs *v, const char *name, int n, char *out) { (void)v; return BASE_VFS->xFullPathname(BASE_VFS, name, n, out); }
static void *vfsDlOpen(sqlite3_vfs *v, const char *path) { (void)v; return BASE_VFS->xDlOpen(BASE_VFS, path); }
static void vfsDlError(sqlite3_vfs *v, int n, char *out) { (void)v; BASE_VFS->xDlError(BASE_VFS, n, out); }
static void (*vfsDlSym(sqlite3_vfs *v, void *lib, const char *symbol))(void) { (void)v; return BASE_VFS->xDlSym(BASE_VFS, lib, symbol); }
static void vfsDlClose(sqlite3_vfs *v, void *lib) { (void)v; BASE_VFS->xDlClose(BASE_VFS, lib); }
static int vfsRandomness(sqlite3_vfs *v, int n, char *out) { (void)v; return BASE_VFS->xRandomness(BASE_VFS, n, out); }
static int vfsSleep(sqlite3_vfs *v, int micros) { (void)v; return BASE_VFS->xSleep(BASE_VFS, micros); }
static int vfsCurrentTime(sqlite3_vfs *v, double *out) { (void)v; return BASE_VFS->xCurrentTime(BASE_VFS, out); }
static int vfsGetLastError(sqlite3_vfs *v, int n, char *out) { (void)v; return BASE_VFS->xGetLastError(BASE_VFS, n, out); }
static int vfsCurrentTimeInt64(sqlite3_vfs *v, sqlite3_int64 *out) { (void)v; return BASE_VFS->xCurrentTimeInt64(BASE_VFS, out); }

#ifdef _WIN32
__declspec(dllexport)
#endif
int sqlite3_walvfs_init(sqlite3 *db, char **error, const sqlite3_api_routines *api) {
  sqlite3_vfs *base;
  int rc;
  (void)db;
  SQLITE_EXTENSION_INIT2(api);
  if (sqlite3_vfs_find(WAL_VFS_NAME)) return SQLITE_OK_LOAD_PERMANENTLY;
  base = sqlite3_vfs_find(BASE_VFS_NAME);
  if (!base || base->iVersion < 2) {
    *error = sqlite3_mprintf("%s needs SQLite's %s VFS", WAL_VFS_NAME, BASE_VFS_NAME);
    return SQLITE_ERROR;
  }
  walVfs.iVersion = 2;
  walVfs.szOsFile = (int)(sizeof(WalFile) > sizeof(DbFile) ? sizeof(WalFile) : sizeof(DbFile)) + base->szOsFile;
  walVfs.mxPathname = base->mxPathname;
  walVfs.zName = WAL_VFS_NAME;
  walVfs.pAppData = base;
  walVfs.xOpen = vfsOpen;
  walVfs.xDelete = vfsDelete;
  walVfs.xAccess = vfsAccess;
  walVfs.xFullPathname = vfsFullPathname;
  walVfs.xDlOpen = vfsDlOpen;
  walVfs.xDlError = vfsDlError;
  walVfs.xDlSym = vfsDlSym;
  walVfs.xDlClose = vfsDlClose;
  walVfs.xRandomness = vfsRandomness;
  walVfs.xSleep = vfsSleep;
  walVfs.xCurrentTime = vfsCurrentTime;
  walVfs.xGetLastError = vfsGetLastError;
  walVfs.xCurrentTimeInt64 = vfsCurrentTimeInt64;
  rc = sqlite3_vfs_register(&walVfs, 0);
  return rc == SQLITE_OK ? SQLITE_OK_LOAD_PERMANENTLY : rc;
}
