// One run directory, one writer: an advisory lock (flock) on RUN/.lock, held while a trainer runs. A
// second `train`/`finetune` on the same run.dir is refused instead of interleaving checkpoints. The kernel
// drops the lock when the holder exits, however it exits, so a crash never leaves a stale lock behind.
#pragma once

#include <filesystem>
#include <vector>

namespace lm::util {

class RunLock {
 public:
  /// Creates `run_dir` when missing and locks RUN/.lock (which records the holder's pid). Throws
  /// ConfigError (exit 2) naming the holder when another process holds it.
  explicit RunLock(const std::filesystem::path& run_dir);
  /// Drops the lock. When this lock created the run directory and the run wrote nothing into it (a run
  /// refused before its first file), removes .lock and the directories it created, so a refusal leaves no
  /// trace; a directory that existed before, or holds anything else, is kept.
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

 private:
  int fd_ = -1;
  std::filesystem::path lock_path_;
  std::vector<std::filesystem::path> created_;  ///< the directories this lock created, innermost first
};

}  // namespace lm::util
