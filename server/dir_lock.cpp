#include "server/dir_lock.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include <fmt/format.h>

#include "core/os_error.h"

namespace pagefile::net {

namespace {

// The pid the holder wrote into the file, for the message only: an OFD
// lock's F_OFD_GETLK reports no pid.
std::string holder_of(int fd) {
  char buf[32] = {};
  ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  std::string pid = n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
  while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
  return pid.empty() ? "unknown" : pid;
}

}  // namespace

Result<std::unique_ptr<DirLock>> DirLock::acquire(const std::filesystem::path& dir) {
  std::filesystem::path path = dir / "LOCK";
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return errno_status(errno, path.string(), "open");
  std::unique_ptr<DirLock> lock(new DirLock(fd));  // closes fd on every failure below
  struct flock fl {};
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  while (::fcntl(fd, F_OFD_SETLK, &fl) != 0) {
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EACCES) {
      std::string holder = holder_of(fd);
      std::string who = holder == std::to_string(::getpid()) ? "in this process"
                                                             : fmt::format("(pid {})", holder);
      return Status::busy(dir.string(),
                          fmt::format("is in use by another page server {}; one directory "
                                      "serves one server at a time; to share data between "
                                      "processes, run pagefiled and give each process its --bus",
                                      who));
    }
    return errno_status(errno, path.string(), "lock");
  }
  std::string pid = fmt::format("{}\n", ::getpid());
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) < 0) {
    return errno_status(errno, path.string(), "write pid");
  }
  return lock;
}

DirLock::~DirLock() { ::close(fd_); }

}  // namespace pagefile::net
