// The full executable's entry point: hands argv to the CLI, which owns parsing, dispatch and exit codes.
// Compiled twice: as `lmtrain_full` (which the small `lmtrain` front execs for every command but `prepare`,
// src/front_main.cpp), and with LMTRAIN_FAULT_INJECTION as the test build's `lmtrain_faults`, the only
// binary that reads LMTRAIN_TEST_* fault variables from the environment (util/faults.h).
#include "cli/app.h"
#include "util/threads.h"

int main(int argc, char** argv) {
  // OpenBLAS chose its kernels when it was loaded, before main; the front sets OPENBLAS_CORETYPE first, a
  // direct start (the test build, a user) starts again with it set (util/threads.h).
  lm::util::restart_for_blas_core(argv);
#ifdef LMTRAIN_FAULT_INJECTION
  return lm::cli::run(argc, argv, lm::util::faults_from_environment());
#else
  return lm::cli::run(argc, argv);
#endif
}
