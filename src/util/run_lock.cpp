#include "util/run_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "util/errors.h"

namespace lm::util {

RunLock::RunLock(const std::filesystem::path& run_dir) {
  std::error_code ec;
  std::filesystem::create_directories(run_dir, ec);
  const auto path = run_dir / ".lock";
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    throw ConfigError("[run] cannot open the run lock '" + path.string() + "': " + std::strerror(errno) +
                      ". Hint: run.dir must be a writable directory.");
  }
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    char buf[32] = {0};
    const ssize_t n = ::pread(fd_, buf, sizeof(buf) - 1, 0);
    std::string holder = n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string("unknown");
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
    ::close(fd_);
    fd_ = -1;
    throw ConfigError("[run] run.dir '" + run_dir.string() + "' is in use: expected no other trainer, got process " +
                      holder + " holding " + path.string() +
                      ". Hint: wait for it to finish, stop it (it saves on SIGTERM), or choose another run.dir.");
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) == 0) {
    [[maybe_unused]] ssize_t w = ::pwrite(fd_, pid.data(), pid.size(), 0);
  }
}

RunLock::~RunLock() {
  if (fd_ >= 0) ::close(fd_);  // closing drops the lock
}

}  // namespace lm::util
