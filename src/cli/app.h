// The command-line application: CLI11 subcommands, and the only place that catches exceptions and maps
// them to exit codes (docs/ARCHITECTURE.md "Errors and exit codes"; docs/errors.md lists them).
#pragma once


namespace lm::cli {

/// Parses argv, runs the chosen subcommand, returns the process exit code.
int run(int argc, char** argv);

}  // namespace lm::cli
