/* The SQLite VFS "pagefile": databases, journals and WAL files as Pagefiles.
 *
 * Programs that link SQLite and this library statically call
 * sqlite3_pagefile_register() once; programs that load extensions load
 * pagefile.so (entry point sqlite3_pagefile_init). Either way every later
 * connection also gets the SQL functions pagefile_unlink(path),
 * pagefile_exists(path) and pagefile_size(path). doc/sqlite_vfs.md has the
 * URI parameters, pragmas and guarantees.
 *
 * Thread-safety: registration may be called from any thread, any number of
 * times. */
#ifndef PAGEFILE_VFS_H
#define PAGEFILE_VFS_H

#ifdef __cplusplus
extern "C" {
#endif

/* Registers the VFS "pagefile" (as SQLite's default when make_default is
 * non-zero) and the SQL functions on every connection opened afterwards.
 * Returns SQLITE_OK, or SQLite's error when registration failed. */
int sqlite3_pagefile_register(int make_default);

#ifdef __cplusplus
}
#endif

#endif /* PAGEFILE_VFS_H */
