// Fault injection: the one seam through which tests make a run fail on purpose (a NaN loss, a slow step,
// a slow or failing checkpoint save). The trainer and the checkpoint saver take a Faults value; a default
// one injects nothing. Only a test build fills it from the environment: faults_from_environment() is
// defined in fault_env.cpp, which CMake compiles into the test build's `lmtrain_faults` only (option
// LMTRAIN_FAULT_INJECTION), never into the release `lmtrain`, so no variable can change a production run.
#pragma once

#include <cstdint>
#include <string>

namespace lm::util {

struct Faults {
  int64_t nan_step = 0;       ///< poison the loss and gradients of this step (1-based); 0 = never
  int64_t nan_rank = -1;      ///< in a multi-process run, poison only this rank's (-1 = every rank's)
  int64_t step_delay_ms = 0;  ///< sleep after each optimizer step, so a test can signal mid-run
  int64_t save_pause_ms = 0;  ///< sleep after each checkpoint file, so a test can kill -9 mid-save
  std::string fail_save;      ///< checkpoint name (e.g. "step_00000008") whose save fails like a full disk
  int64_t eval_delay_ms = 0;  ///< sleep before each batch of the final validation, so a test can signal in it
  int64_t prepare_delay_ms = 0;  ///< sleep before tokenizer training and before each corpus encoding
  std::string kill_save;      ///< "NAME:PHASE": SIGKILL this process during the save of checkpoint NAME at PHASE
                              ///< (file = after the first file, manifest = before the rename, renamed = before
                              ///< `latest` is replaced, latest = after it)
  int64_t inf_grad_step = 0;  ///< put +Inf into one gradient of this step (the loss stays finite); 0 = never
};

/// Test builds only. Reads LMTRAIN_TEST_NAN_STEP, LMTRAIN_TEST_NAN_RANK, LMTRAIN_TEST_INF_GRAD_STEP,
/// LMTRAIN_TEST_STEP_DELAY_MS, LMTRAIN_TEST_SAVE_PAUSE_MS, LMTRAIN_TEST_FAIL_SAVE, LMTRAIN_TEST_KILL_SAVE,
/// LMTRAIN_TEST_EVAL_DELAY_MS and LMTRAIN_TEST_PREPARE_DELAY_MS (unset = no fault).
Faults faults_from_environment();

}  // namespace lm::util
