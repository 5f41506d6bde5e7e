#include "util/run_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "util/errors.h"

namespace lm::util {

RunLock::RunLock(const std::filesystem::path& run_dir) {
  std::error_code ec;
  for (auto d = std::filesystem::absolute(run_dir, ec).lexically_normal(); !d.empty() && d != d.parent_path();
       d = d.parent_path()) {
    if (d.filename().empty()) continue;  // "runs/x/" normalises with an empty last name
    if (std::filesystem::exists(d, ec)) break;
    created_.push_back(d);
  }
  std::filesystem::create_directories(run_dir, ec);
  const auto path = run_dir / ".lock";
  lock_path_ = path;
  auto open_lock = [&] {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) {
      throw ConfigError("[run] cannot open the run lock '" + path.string() + "': " + std::strerror(errno) +
                        ". Hint: run.dir must be a writable directory.");
    }
  };
  open_lock();
  // A lock taken on a .lock that its creator removed meanwhile (a refused run cleans up its own directory,
  // RunLock's destructor) locks nothing: open the path again.
  for (int tries = 0; tries < 8 && ::flock(fd_, LOCK_EX | LOCK_NB) == 0; ++tries) {
    struct stat held {}, now {};
    if (::fstat(fd_, &held) == 0 && ::stat(path.c_str(), &now) == 0 && held.st_ino == now.st_ino && held.st_dev == now.st_dev) {
      const std::string pid = std::to_string(::getpid()) + "\n";
      if (::ftruncate(fd_, 0) == 0) {
        [[maybe_unused]] ssize_t w = ::pwrite(fd_, pid.data(), pid.size(), 0);
      }
      return;
    }
    ::close(fd_);
    std::filesystem::create_directories(run_dir, ec);
    open_lock();
  }
  {
    char buf[32] = {0};
    const ssize_t n = ::pread(fd_, buf, sizeof(buf) - 1, 0);
    std::string holder = n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string("unknown");
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
    ::close(fd_);
    fd_ = -1;
    created_.clear();  // another process's run: never ours to remove
    throw ConfigError("[run] run.dir '" + run_dir.string() + "' is in use: expected no other trainer, got process " +
                      holder + " holding " + path.string() +
                      ". Hint: wait for it to finish, stop it (it saves on SIGTERM), or choose another run.dir.");
  }
}

RunLock::~RunLock() {
  if (!created_.empty()) {
    std::error_code ec;
    const auto run_dir = lock_path_.parent_path();
    bool only_lock = true;
    for (std::filesystem::directory_iterator it(run_dir, ec), end; !ec && it != end; it.increment(ec)) {
      only_lock = only_lock && it->path().filename() == ".lock";
    }
    if (!ec && only_lock) {
      std::filesystem::remove(lock_path_, ec);
      for (const auto& d : created_) {
        if (!std::filesystem::remove(d, ec)) break;  // removes only an empty directory
      }
    }
  }
  if (fd_ >= 0) ::close(fd_);  // closing drops the lock
}

}  // namespace lm::util
