// SQLite's wal-index for a local database (xShmMap, xShmLock, xShmUnmap),
// kept as os_unix.c keeps it: the file NAME-shm beside the database, mapped
// region by region, and SQLite's eight WAL locks as byte-range locks on that
// file at the bytes os_unix.c uses (kLockBase.., and kDeadManSwitch).
//
// Each connection opens the file itself and its locks are open-file-
// description locks (F_OFD_SETLK), so two connections conflict the same way
// whether they live in one process or in two, with no table of who holds
// what in between (os_unix.c keeps one because its POSIX locks belong to the
// process, not to the connection).
//
// The dead man's switch: every connection read-locks kDeadManSwitch for as
// long as it has the file open. One that finds no lock there is the first
// (the others have closed or died): it write-locks the byte and truncates
// the file, so that a wal-index left by processes that crashed is rebuilt
// from the WAL by SQLite's recovery rather than trusted.
//
// A wal-index this user may read but not write (its mode, or a read-only
// file system) is opened read-only, as os_unix.c does: mapped read-only
// once a writer has initialised it (a writer holds the switch), and until
// then map() answers kReadOnly, on which SQLite reads the WAL itself
// (SQLITE_READONLY_CANTINIT).
//
// Thread-safety: none; the VFS calls it under its file's mutex.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "pagefile/status.h"

namespace pagefile::vfs {

class SharedMemory {
 public:
  // os_unix.c's offsets: SQLite's lock i is byte kLockBase + i.
  static constexpr int kLockBase = 120;
  static constexpr int kLocks = 8;  // SQLITE_SHM_NLOCK
  static constexpr int kDeadManSwitch = kLockBase + kLocks;

  // Opens (creating it with `mode`) the wal-index file at `path` and takes
  // the dead man's switch. kBusy when a connection is initialising it right
  // now; the open's error (kPermissionDenied...) when it cannot be opened
  // even for reading.
  static Result<std::unique_ptr<SharedMemory>> open(const std::string& path, mode_t mode);
  // Unmaps and closes (close(false)).
  ~SharedMemory();
  SharedMemory(const SharedMemory&) = delete;
  SharedMemory& operator=(const SharedMemory&) = delete;

  // Region `region` of `size` bytes, mapped shared: its address, or nullptr
  // when the file does not reach that far and `extend` is false. Extending
  // writes the last byte of each new page of the file, so that a full disk
  // is an error here rather than a fault on first touch (as os_unix.c).
  // Read-only (read_only()): never extended, mapped for reading only, and
  // kReadOnly while no writer has initialised the file.
  // REQUIRES: every call gives the same size.
  Result<void*> map(int region, int size, bool extend);
  bool read_only() const { return read_only_; }

  enum class LockKind { kUnlock, kShared, kExclusive };
  // SQLite's locks `offset` to `offset + n - 1` (each below kLocks): kBusy
  // when another connection holds a conflicting lock; never waits.
  Status lock(int offset, int n, LockKind kind);

  // Unmaps every region and closes the file, which lets its locks go; with
  // `remove`, removes the file first (SQLite asks that of the last
  // connection, which holds the database's EXCLUSIVE lock).
  Status close(bool remove);

  const std::string& path() const { return path_; }

 private:
  SharedMemory(std::string path, int fd, bool read_only) : path_(std::move(path)), fd_(fd), read_only_(read_only) {}
  // Takes the dead man's switch (the first resets the file); a read-only
  // one only joins a writer's (attached_ stays false while there is none).
  Status attach();

  const std::string path_;
  int fd_;
  const bool read_only_;
  bool attached_ = false;
  int region_size_ = 0;
  std::vector<void*> regions_;  // by region; nullptr where not mapped yet
};

}  // namespace pagefile::vfs
