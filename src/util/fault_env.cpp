// Test builds only (CMake option LMTRAIN_FAULT_INJECTION): fills util::Faults from LMTRAIN_TEST_*
// variables. Not part of lmtrain_core, so the release binary cannot call it.
#include <cstdlib>

#include "util/faults.h"

namespace lm::util {

Faults faults_from_environment() {
  auto number = [](const char* name) -> int64_t {
    const char* v = std::getenv(name);
    return v ? std::atoll(v) : 0;
  };
  Faults f;
  f.nan_step = number("LMTRAIN_TEST_NAN_STEP");
  if (std::getenv("LMTRAIN_TEST_NAN_RANK")) f.nan_rank = number("LMTRAIN_TEST_NAN_RANK");
  f.step_delay_ms = number("LMTRAIN_TEST_STEP_DELAY_MS");
  f.save_pause_ms = number("LMTRAIN_TEST_SAVE_PAUSE_MS");
  if (const char* v = std::getenv("LMTRAIN_TEST_FAIL_SAVE")) f.fail_save = v;
  if (const char* v = std::getenv("LMTRAIN_TEST_KILL_SAVE")) f.kill_save = v;
  f.inf_grad_step = number("LMTRAIN_TEST_INF_GRAD_STEP");
  f.eval_delay_ms = number("LMTRAIN_TEST_EVAL_DELAY_MS");
  f.prepare_delay_ms = number("LMTRAIN_TEST_PREPARE_DELAY_MS");
  return f;
}

}  // namespace lm::util
