// The bad-input and fault matrix: each case is input -> expected message (tests/matrix_expect.h) -> exit
// code -> what must stay intact. The groups are in tests/matrix_*_test.cpp; tests/matrix_test.cpp runs every
// case as its own CTest test (Matrix/FaultMatrix.Run/<name>) and keeps docs/FAULT_MATRIX.md equal to the list.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "test_util.h"

namespace lm::test::matrix {

/// What a case's action can use: its own scratch directory and a trained 4-step run made once for all cases
/// (checkpoints at steps 2 and 4, `latest` = step_00000004, the run's tokenizer and token files).
class Ctx {
 public:
  explicit Ctx(const std::string& name);
  const ScratchDir& dir() const { return dir_; }
  fs::path operator/(const std::string& name) const { return dir_ / name; }
  /// The shared trained run (read-only: copy before changing anything).
  static const fs::path& base_run();
  /// SHA-256 of model.safetensors of the shared run's step-4 checkpoint (what an uninterrupted run ends with).
  static std::string base_final_sha();
  /// Writes `bytes` to dir/name and returns the path.
  fs::path write(const std::string& name, const std::string& bytes) const;
  /// A copy of the shared run as dir/name.
  fs::path copy_run(const std::string& name = "run") const;
  /// A copy of the shared run's step_0000000<step> as dir/name.
  fs::path copy_checkpoint(int step, const std::string& name) const;
  /// The shared run's config with run.dir = dir/run (same seed, data and model: the same losses and weights).
  fs::path config(const std::string& run = "run", const std::string& model = "") const;
  /// Runs `sh -c` through the release lmtrain, or lmtrain_faults with `faults` set.
  RunResult lm(const std::string& args, const std::string& faults = "") const;
  /// Starts lmtrain_faults with `faults` (the release lmtrain when empty), waits until `ready(log so far)`
  /// holds, sends `sig`, and returns its exit code and log.
  RunResult signal_when(const std::string& args, const std::string& faults,
                        const std::function<bool(const std::string& log)>& ready, int sig) const;
  /// Starts lmtrain_faults held at `event` (util/faults.h), sends `sig` once it is held there and, when
  /// `then` names an event the run reaches after that, a second SIGINT once it is held there; returns its
  /// exit code and log. No delay decides where a signal lands.
  RunResult signal_at(const std::string& args, const std::string& event, int sig, const std::string& then = "") const;
  /// Names of the entries of dir/sub that contain `part` (e.g. ".tmp-").
  std::vector<std::string> entries_with(const std::string& sub, const std::string& part) const;

 private:
  ScratchDir dir_;
};

/// One row of the matrix.
struct Case {
  std::string name;     ///< CTest name suffix, [a-z0-9_]
  std::string input;    ///< the bad input or fault, in words
  std::string pattern;  ///< regex the output must contain (from matrix_expect.h)
  int exit_code;        ///< the exit code the case must end with
  std::string intact;   ///< what must stay intact, in words
  std::function<RunResult(Ctx&)> act;                     ///< makes the input and runs lmtrain
  std::function<void(Ctx&, const RunResult&)> check;      ///< asserts `intact` (may be empty)
};

std::vector<Case> corpus_cases();      ///< matrix_data_test.cpp
std::vector<Case> config_cases();      ///< matrix_data_test.cpp
std::vector<Case> token_file_cases();  ///< matrix_data_test.cpp
std::vector<Case> checkpoint_cases();  ///< matrix_ckpt_test.cpp
std::vector<Case> process_cases();     ///< matrix_run_test.cpp
std::vector<Case> signal_cases();      ///< matrix_run_test.cpp (numerics included)
std::vector<Case> sampling_cases();    ///< matrix_run_test.cpp

/// "setpriv --bounding-set=-dac_override,-dac_read_search " for root (who ignores file modes), else "".
std::string as_unprivileged();
/// Flips bit `bit` of byte `offset` of `file` in place.
void flip_bit(const fs::path& file, size_t offset, int bit = 0);
/// `pattern` with every `key` (e.g. "%PID%") replaced by `value`.
inline std::string subst(std::string pattern, const std::string& key, const std::string& value) {
  for (size_t at = 0; (at = pattern.find(key, at)) != std::string::npos; at += value.size()) {
    pattern.replace(at, key.size(), value);
  }
  return pattern;
}
/// Keeps the first `bytes` bytes of `file`.
void truncate_to(const fs::path& file, size_t bytes);

}  // namespace lm::test::matrix
