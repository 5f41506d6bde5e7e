// The full executable's entry point: hands argv to the CLI, which owns parsing, dispatch and exit codes.
// Compiled twice: as `lmtrain_full` (which the small `lmtrain` front execs for every command but `prepare`,
// src/front_main.cpp), and with LMTRAIN_FAULT_INJECTION as the test build's `lmtrain_faults`, the only
// binary that installs fault hooks from LMTRAIN_TEST_* variables (util/faults.h).
#include <unistd.h>

#include "cli/app.h"
#include "util/blas_kernels.h"
#include "util/faults.h"

int main(int argc, char** argv) {
  // Started directly (not through the front), with OpenBLAS already loaded on kernels narrower than this CPU
  // runs: once more, with OPENBLAS_CORETYPE set (util/blas_kernels.h). On failure it goes on as it is.
  if (lm::util::blas_kernels_need_restart()) ::execv("/proc/self/exe", argv);
#ifdef LMTRAIN_FAULT_INJECTION
  lm::util::install_environment_faults();
#endif
  return lm::cli::run(argc, argv);
}
