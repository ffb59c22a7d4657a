#include "store/read_mapping.h"

#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <csetjmp>
#include <csignal>
#include <cstring>

namespace pagefile {

namespace {

// The copy running in this thread, to return to at a SIGBUS (its jump
// buffer), or none.
thread_local sigjmp_buf* volatile t_copying = nullptr;

// The SIGBUS action before ours: where a signal outside a copy goes.
struct sigaction g_previous {};

void on_sigbus(int signal, siginfo_t* info, void* context) {
  if (sigjmp_buf* copying = t_copying) {
    t_copying = nullptr;
    siglongjmp(*copying, 1);
  }
  if ((g_previous.sa_flags & SA_SIGINFO) != 0) {
    if (g_previous.sa_sigaction != nullptr) g_previous.sa_sigaction(signal, info, context);
    return;
  }
  if (g_previous.sa_handler == SIG_DFL || g_previous.sa_handler == SIG_IGN) {
    // The load that faulted runs again on return and faults again, now
    // with the default action: the process ends as it would have without
    // this handler. (A fault's SIGBUS cannot be ignored.)
    ::signal(SIGBUS, SIG_DFL);
    return;
  }
  g_previous.sa_handler(signal);
}

void install_handler() {
  static const bool installed = [] {
    struct sigaction action {};
    action.sa_sigaction = on_sigbus;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
    return ::sigaction(SIGBUS, &action, &g_previous) == 0;
  }();
  (void)installed;
}

// Copies, or returns false at a SIGBUS. (Apart, and not inlined: nothing
// of the caller's lives in registers across the jump.)
[[gnu::noinline]] bool guarded_copy(std::byte* to, const std::byte* from, size_t bytes) {
  sigjmp_buf copying;
  if (sigsetjmp(copying, /*savesigs=*/0) != 0) return false;
  t_copying = &copying;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  std::memcpy(to, from, bytes);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  t_copying = nullptr;
  return true;
}

}  // namespace

ReadMapping::~ReadMapping() {
  MutexLock lock(mu_);
  for (auto [at, length] : maps_) ::munmap(at, length);
}

void ReadMapping::saw_length(off_t length) {
  const std::byte* base = base_.load(std::memory_order_acquire);
  if (base == nullptr || length > end_.load(std::memory_order_relaxed)) {
    MutexLock lock(mu_);
    size_t mapped = maps_.empty() ? 0 : maps_.back().second;
    if (static_cast<size_t>(length) > mapped) {
      if (cannot_map_ || length <= 0) return;
      // Twice the file, so that growing it maps again only now and then.
      const size_t reserve = std::bit_ceil(static_cast<size_t>(std::max<off_t>(kMinReserve, 2 * length)));
      void* at = ::mmap(nullptr, reserve, PROT_READ, MAP_SHARED, fd_, 0);
      if (at == MAP_FAILED) {
        cannot_map_ = true;
        return;
      }
      install_handler();
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
  return guarded_copy(out.data(), base_.load(std::memory_order_acquire) + offset, out.size());
}

}  // namespace pagefile
