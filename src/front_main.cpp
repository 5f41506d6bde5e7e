// The `lmtrain` executable: a small front without LibTorch that runs `prepare` itself and hands every other
// command to `lmtrain_full` (src/main.cpp) beside it; docs/ARCHITECTURE.md "Two executables".
#include "cli/front.h"

int main(int argc, char** argv) { return lm::cli::run_front(argc, argv); }
