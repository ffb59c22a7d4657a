#include "store/read_mapping.h"

#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <csetjmp>
#include <csignal>
#include <cstdint>
#include <cstring>

#include <pthread.h>

namespace pagefile {

namespace {

// The guarded work running in this thread (run_guarded), to return to at
// a SIGBUS (its jump buffer), or none.
// (initial-exec: the handler reads it in threads that never ran one, where
// a dynamically loaded library's thread-local block would be allocated, by
// malloc, at that first touch.)
[[gnu::tls_model("initial-exec")]] thread_local sigjmp_buf* volatile t_guard = nullptr;

// The SIGBUS action before ours: where a signal outside a copy goes.
struct sigaction g_previous {};

// Whether SIGBUS is blocked in this thread, as last asked, and the guarded
// runs before it is asked again (none at a thread's first). A fault's
// SIGBUS that is blocked is not delivered to a handler: the kernel ends
// the process.
thread_local bool t_blocked = false;
thread_local unsigned t_runs_until_asked = 0;
constexpr unsigned kRunsBetweenAsks = 1024;

bool sigbus_blocked() {
  if (t_runs_until_asked-- == 0) {
    sigset_t mask;
    t_blocked = ::pthread_sigmask(SIG_SETMASK, nullptr, &mask) != 0 || sigismember(&mask, SIGBUS) != 0;
    t_runs_until_asked = kRunsBetweenAsks;
  }
  return t_blocked;
}

void on_sigbus(int signal, siginfo_t* info, void* context) {
  // (A SIGBUS sent by a process, si_code <= 0, is no fault of a copy.)
  const bool fault = info != nullptr && info->si_code > 0;
  if (sigjmp_buf* guard = t_guard; guard != nullptr && fault) {
    t_guard = nullptr;
    siglongjmp(*guard, 1);
  }
  // Not ours: as the action before ours would have it. (sa_handler and
  // sa_sigaction share their storage: SIG_DFL and SIG_IGN are tested
  // first, whatever the flags.)
  if (g_previous.sa_handler == SIG_IGN) {
    if (fault) ::signal(SIGBUS, SIG_DFL);  // (a fault's SIGBUS cannot be ignored: the load faults again)
    return;
  }
  if (g_previous.sa_handler == SIG_DFL) {
    // A fault: the load runs again on return and faults again, now with
    // the default action. A signal sent: sent again, to end the process.
    ::signal(SIGBUS, SIG_DFL);
    if (!fault) ::raise(SIGBUS);
    return;
  }
  // (SA_RESETHAND: the handler before ours runs once, then the default.)
  if ((g_previous.sa_flags & SA_RESETHAND) != 0) ::signal(SIGBUS, SIG_DFL);
  if ((g_previous.sa_flags & SA_SIGINFO) != 0) {
    g_previous.sa_sigaction(signal, info, context);
  } else {
    g_previous.sa_handler(signal);
  }
}

bool install_handler() {
  static const bool installed = [] {
    struct sigaction action {};
    action.sa_sigaction = on_sigbus;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
    return ::sigaction(SIGBUS, &action, &g_previous) == 0;
  }();
  return installed;
}

struct Copy {
  std::byte* to;
  const std::byte* from;
  size_t bytes;
};

// Copied in pieces of 2 KiB: glibc copies those with vector loads and
// stores, where a page or a run in one memcpy is its `rep movsb` (above
// 2112 bytes, its threshold there). On the machine measured (AMD EPYC, a
// VM), that took 1.4 to 2.1 µs per 4 KiB out of a file's shared mapping,
// against 0.14 in 2 KiB pieces, and 0.10 to 0.13 either way from the heap
// (bench/README.md, "Copies out of the mapping").
constexpr size_t kCopyPiece = 2048;

void copy_bytes(void* arg) {
  auto* copy = static_cast<Copy*>(arg);
  for (size_t done = 0; done < copy->bytes;) {
    size_t piece = std::min(kCopyPiece, copy->bytes - done);
    // (Hidden from the compiler, which would otherwise write its own
    // `rep movsq` for a size it knows to be at most 2 KiB, rather than
    // call glibc's memcpy.)
    asm("" : "+r"(piece));
    std::memcpy(copy->to + done, copy->from + done, piece);
    done += piece;
  }
}

}  // namespace

// (Without the handler, or with the signal blocked, a fault would end the
// process: the caller's pread or pwrite instead.)
bool can_guard() { return install_handler() && !sigbus_blocked(); }

// (Not inlined: nothing of the caller's lives in registers across the jump.)
[[gnu::noinline]] bool run_guarded(void (*work)(void* arg), void* arg) {
  if (!can_guard()) return false;
  sigjmp_buf guard;
  if (sigsetjmp(guard, /*savesigs=*/0) != 0) return false;
  t_guard = &guard;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  work(arg);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  t_guard = nullptr;
  return true;
}

ReadMapping::~ReadMapping() {
  MutexLock lock(mu_);
  for (auto [at, length] : maps_) ::munmap(at, length);
}

void ReadMapping::saw_length(off_t length) {
  const std::byte* base = base_.load(std::memory_order_acquire);
  if (base == nullptr || length > end_.load(std::memory_order_acquire)) {
    MutexLock lock(mu_);
    size_t mapped = maps_.empty() ? 0 : maps_.back().second;
    if (static_cast<size_t>(length) > mapped) {
      if (cannot_map_ || length <= 0) return;
      // Twice the file, so that growing it maps again only now and then.
      const uint64_t reserve = std::bit_ceil(static_cast<uint64_t>(std::max<off_t>(kMinReserve, 2 * length)));
      void* at = ::mmap(nullptr, reserve, PROT_READ, MAP_SHARED, fd_, 0);
      if (at == MAP_FAILED) {
        cannot_map_ = true;
        return;
      }
      maps_.emplace_back(at, reserve);
      base_.store(static_cast<const std::byte*>(at), std::memory_order_release);
    }
  }
  end_.store(length, std::memory_order_release);
}

void ReadMapping::will_cut(off_t length) {
  off_t end = end_.load(std::memory_order_relaxed);
  while (length < end && !end_.compare_exchange_weak(end, length, std::memory_order_release)) {
  }
}

bool ReadMapping::copy(std::span<std::byte> out, off_t offset) const {
  const off_t end = end_.load(std::memory_order_acquire);
  if (offset < 0 || offset + static_cast<off_t>(out.size()) > end) return false;
  Copy copy{out.data(), base_.load(std::memory_order_acquire) + offset, out.size()};
  return run_guarded(copy_bytes, &copy);
}

}  // namespace pagefile
