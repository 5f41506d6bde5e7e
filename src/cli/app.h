// The command-line application: CLI11 subcommands, and the only place that catches exceptions and maps
// them to exit codes (docs/ARCHITECTURE.md "Errors and exit codes"; docs/errors.md lists them).
#pragma once

#include "util/faults.h"

namespace lm::cli {

/// Parses argv, runs the chosen subcommand, returns the process exit code. `faults` reach the trainer
/// and the checkpoint saver; only the test build's main passes any (util/faults.h).
int run(int argc, char** argv, const util::Faults& faults = {});

}  // namespace lm::cli
