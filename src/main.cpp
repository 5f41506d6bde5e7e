// The full executable's entry point: hands argv to the CLI, which owns parsing, dispatch and exit codes.
// Compiled twice: as `lmtrain_full` (which the small `lmtrain` front execs for every command but `prepare`,
// src/front_main.cpp), and with LMTRAIN_FAULT_INJECTION as the test build's `lmtrain_faults`, the only
// binary that reads LMTRAIN_TEST_* fault variables from the environment (util/faults.h).
#include "cli/app.h"

int main(int argc, char** argv) {
#ifdef LMTRAIN_FAULT_INJECTION
  return lm::cli::run(argc, argv, lm::util::faults_from_environment());
#else
  return lm::cli::run(argc, argv);
#endif
}
