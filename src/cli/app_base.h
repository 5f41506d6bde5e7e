// What both executables' command lines share (docs/ARCHITECTURE.md "Two executables"): the root CLI11 app
// with its global flags, the `prepare` command, and the one place that maps exceptions to exit codes.
// Free of LibTorch: the small `lmtrain` front executable links it without LibTorch. Internal to cli/.
#pragma once

#include <CLI/CLI.hpp>

namespace lm::cli {

/// The root app's description (exit codes included), --version and -v/--verbose (logging set up once
/// parsing is complete). `verbose` must outlive the app.
void describe_app(CLI::App& app, bool& verbose);

/// prepare (cmd_prepare.cpp).
void add_data_commands(CLI::App& app);

/// corpus get (cmd_prepare.cpp).
void add_corpus_commands(CLI::App& app);

/// Parses argv into `app` and runs the chosen subcommand; returns the process exit code (docs/errors.md
/// lists them): CLI11's own for --help/--version, 2 for a bad command line, an lm::Error's code, else 1.
int parse_and_run(CLI::App& app, int argc, char** argv);

}  // namespace lm::cli
