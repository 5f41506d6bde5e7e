// Fault injection: the one seam through which tests make a run fail or stop on purpose. Production code says
// where it is (`fault_hooks().reached("step:3")`) and asks whether to fail (`nan_at`, `fail_save`, ...); the
// process's hooks do nothing unless someone installs others. Only the test build's `lmtrain_faults` does
// (util/fault_env.cpp, compiled into it alone: LMTRAIN_TEST_* variables) and the tests in-process; the
// release `lmtrain` installs none, so no variable can change a production run.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace lm::util {

class FaultHooks {
 public:
  virtual ~FaultHooks() = default;
  /// The run reached `event`:
  ///   "prepare:tokenizer"  before the run's tokenizer is trained (or found current)
  ///   "prepare:encode"     before each corpus encoding
  ///   "step:N"             after optimizer step N (before the loop looks at signals)
  ///   "eval"               before the first batch of the final validation (one process)
  ///   "save:NAME:PHASE"    during the save of checkpoint NAME: file (after its first file), manifest (before
  ///                        the rename), renamed (before `latest` moves), latest (after it)
  /// A test build may hold the process there until a test lets it go, or kill it.
  virtual void reached(const std::string& event) { (void)event; }
  /// Poison the loss and every gradient of step `step` (1-based) on rank `rank` with NaN.
  virtual bool nan_at(int64_t step, int rank) const { (void)step, (void)rank; return false; }
  /// Put +Inf into one gradient of step `step` (the loss stays finite).
  virtual bool inf_grad_at(int64_t step) const { (void)step; return false; }
  /// Fail the save of checkpoint `name` after its first file, like a full disk.
  virtual bool fail_save(const std::string& name) const { (void)name; return false; }
};

/// The process's hooks: ones that do nothing, unless install_fault_hooks replaced them.
FaultHooks& fault_hooks();

/// Replaces the process's hooks (null: back to ones that do nothing). For lmtrain_faults' main and tests.
void install_fault_hooks(std::unique_ptr<FaultHooks> hooks);

/// Test builds only (fault_env.cpp): installs hooks from LMTRAIN_TEST_NAN_STEP, LMTRAIN_TEST_NAN_RANK,
/// LMTRAIN_TEST_INF_GRAD_STEP, LMTRAIN_TEST_FAIL_SAVE, LMTRAIN_TEST_KILL_SAVE ("NAME:PHASE": SIGKILL at that
/// save event) and LMTRAIN_TEST_HOLD ("EVENT,EVENT..."): at each listed event, the first time it is
/// reached, the process writes the file LMTRAIN_TEST_HOLD_DIR/EVENT (EVENT@RANK in a multi-process run)
/// and waits there until it receives a stop signal or the file EVENT.go appears beside it.
void install_environment_faults();

}  // namespace lm::util
