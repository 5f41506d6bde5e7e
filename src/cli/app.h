// The command-line application: CLI11 subcommands, and the only place that catches exceptions and maps
// them to the exit codes of DESIGN.md (README.md lists them).
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "config/config.h"
#include "train/trainer.h"

namespace lm::cli {

/// Parses argv, runs the chosen subcommand, returns the process exit code.
int run(int argc, char** argv);

// Each registers its subcommands on `app`; defined in cmd_*.cpp.
void add_tokenizer_commands(CLI::App& app);
void add_data_commands(CLI::App& app);
void add_train_commands(CLI::App& app);
void add_sample_commands(CLI::App& app);
void add_checkpoint_commands(CLI::App& app);
void add_plot_commands(CLI::App& app);
void add_inspect_commands(CLI::App& app);
void add_finetune_commands(CLI::App& app);
/// `inspect probs|neighbours|positions|params|shapes` (cmd_inspect.cpp).
void add_reading_commands(CLI::App& inspect);
/// `train --dry-run`: one batch through a freshly initialised model of `cfg`, stage by stage; writes nothing.
void run_dry_run(const config::RunConfig& cfg);

/// The TrainJob of a config (cmd_train.cpp); `resume` is resolved, warning about changed settings.
train::TrainJob make_train_job(const config::RunConfig& cfg, const std::string& yaml, bool overwrite,
                               const std::string& resume);

}  // namespace lm::cli
