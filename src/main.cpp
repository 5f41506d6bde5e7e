// lmtrain entry point: hands argv to the CLI, which owns parsing, dispatch and exit codes.
#include "cli/app.h"

int main(int argc, char** argv) { return lm::cli::run(argc, argv); }
