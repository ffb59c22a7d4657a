// A file's bytes copied out of a shared mapping of it, where a pread would
// be one system call a page (LevelDB and LMDB read their files so, and
// SQLite with mmap_size). The bytes are the page cache's, as a pread's: a
// copy is a pread without the kernel entry, and the caller checks them as
// it checks a pread's.
//
// Where a pread answers with an error or a short read, a load from a
// mapping raises SIGBUS: a page of the file that the disk fails to read, or
// one another descriptor has cut off since this one last saw the file's
// length. copy() turns that signal into a false return, and its caller
// reads those bytes with pread, which says what is wrong (EIO, zeros past
// the end) as it did before there was a mapping. So a fault never ends the
// process, and nothing but speed depends on the mapping.
//
// The signal: the first copy (run_guarded) installs a SIGBUS handler
// (SA_NODEFER, so that no signal mask is saved and restored around each
// copy). A SIGBUS outside a copy, or sent by a process rather than raised
// by a fault, goes on as the action before ours would take it: that
// handler (once, if it asked SA_RESETHAND), or the default action (the
// process ends, as it would have without ours). A thread that blocks
// SIGBUS makes no copies (a fault's signal blocked ends the process): its
// reads are preads. An application that installs its own handler after
// ours takes the faults itself: such a copy then ends the process, as
// SQLite's own mmap does at a disk error.
//
// Only bytes up to the length last seen (saw_length, from the caller's
// fstat) are copied: the rest are read with pread, which sees the file's
// end as it is now. The mapping is made larger than the file (a reserve of
// address space, never touched past the end) and a new one made when the
// file outgrows it; the old ones stay mapped until this object ends, since
// a copy in another thread may be reading one.
//
// A length seen late (a count begun before another thread's cut, stored
// after it) only costs a fault and a pread, and a cut inside the last
// system page of the file leaves zeros there rather than a fault: the
// caller checks what it copies, and reads what fails its check again with
// pread (LocalPagefile maps only pages of at least the system's page).
//
// A mapping that cannot be made (no address space left, a file system
// that cannot map) leaves every read to pread.
//
// Thread-safety: thread-safe; copies take no lock.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <span>
#include <utility>
#include <vector>

#include "core/mutex.h"

namespace pagefile {

// Runs work(arg), which loads from or stores into a shared mapping of a
// file: false when it faulted (SIGBUS: a disk error, or the file cut under
// the mapping), where the caller does the same with pread or pwrite, which
// report it. `work` may have done part of its loads and stores. The first
// call installs the handler described above.
bool run_guarded(void (*work)(void* arg), void* arg);
// Whether run_guarded runs its work in this thread now (its handler is
// installed and SIGBUS not blocked here): false from run_guarded is then
// a fault.
bool can_guard();

class ReadMapping {
 public:
  // The least a mapping reserves (address space, not memory).
  static constexpr off_t kMinReserve = off_t{64} << 20;

  explicit ReadMapping(int fd) : fd_(fd) {}
  ~ReadMapping();
  ReadMapping(const ReadMapping&) = delete;
  ReadMapping& operator=(const ReadMapping&) = delete;

  // The file was `length` bytes long just now: copies may reach that far
  // (mapping more of it when it grew past the mapping).
  void saw_length(off_t length) EXCLUDES(mu_);
  // The file is about to be cut to `length` bytes: no copy past it.
  void will_cut(off_t length);
  // Copies the `out.size()` bytes at `offset` into `out`: false (and
  // `out` holds anything) when they lie past the length last seen or the
  // copy faulted; the caller then reads them with pread.
  bool copy(std::span<std::byte> out, off_t offset) const;

 private:
  const int fd_;
  Mutex mu_;
  // Every mapping made (address, length), the latest last.
  std::vector<std::pair<void*, size_t>> maps_ GUARDED_BY(mu_);
  bool cannot_map_ GUARDED_BY(mu_) = false;
  // The latest mapping, and the bytes of it a copy may read: set in this
  // order (a copy loads them in the other), so a length is never longer
  // than the mapping read with it.
  std::atomic<const std::byte*> base_{nullptr};
  std::atomic<off_t> end_{0};
};

}  // namespace pagefile
