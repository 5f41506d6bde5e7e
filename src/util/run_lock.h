// One run directory, one writer: an advisory lock (flock) on RUN/.lock, held while a trainer runs. A
// second `train`/`finetune` on the same run.dir is refused instead of interleaving checkpoints. The kernel
// drops the lock when the holder exits, however it exits, so a crash never leaves a stale lock behind.
#pragma once

#include <filesystem>

namespace lm::util {

class RunLock {
 public:
  /// Creates `run_dir` when missing and locks RUN/.lock (which records the holder's pid). Throws
  /// ConfigError (exit 2) naming the holder when another process holds it.
  explicit RunLock(const std::filesystem::path& run_dir);
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace lm::util
