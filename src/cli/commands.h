// The subcommands, one add_* function per cmd_*.cpp file; app.cpp registers them all. Internal to cli/.
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <string>


namespace lm::model {
class GptImpl;
class Ops;
}
namespace lm::tokenizer {
class Tokenizer;
}

namespace lm::cli {

void add_tokenizer_commands(CLI::App& app);  ///< tokenizer train|stats|encode|decode (cmd_tokenizer.cpp)
void add_train_commands(CLI::App& app);     ///< train (cmd_train.cpp)
void add_finetune_commands(CLI::App& app);  ///< finetune (cmd_finetune.cpp)
void add_sample_commands(CLI::App& app);      ///< sample (cmd_sample.cpp)
void add_checkpoint_commands(CLI::App& app);  ///< ckpt verify|info (cmd_ckpt.cpp)
void add_plot_commands(CLI::App& app);        ///< plot (cmd_plot.cpp)
void add_report_commands(CLI::App& app);      ///< report (cmd_report.cpp)
void add_export_commands(CLI::App& app);      ///< export (cmd_export.cpp)
void add_import_commands(CLI::App& app);      ///< import (cmd_import.cpp)
void add_inspect_commands(CLI::App& app);     ///< inspect drift|probs|neighbours|positions|context (cmd_inspect.cpp)
void add_embed_commands(CLI::App& app);       ///< embed (cmd_embed.cpp)
/// inspect params|shapes (cmd_inspect_model.cpp).
void add_model_reading_commands(CLI::App& inspect);

/// The shared `--checkpoint` option: a checkpoint directory, or a run directory (its `latest`).
inline CLI::Option* add_checkpoint_option(CLI::App* cmd, std::string& target, bool required) {
  auto* opt = cmd->add_option("--checkpoint", target, "checkpoint directory, or a run directory (its `latest`)");
  return required ? opt->required() : opt;
}

/// The shared `--device` option of the reading commands (sample, inspect probs|shapes); default cpu.
inline CLI::Option* add_device_option(CLI::App* cmd, std::string& target) {
  return cmd->add_option("--device", target, "cpu | cuda | cuda:N | auto (auto = CUDA when LibTorch sees a GPU)")
      ->capture_default_str();
}

/// The shared `--nproc N` option of `train` and `finetune` (a local launch, cli/run_process.cpp).
inline CLI::Option* add_nproc_option(CLI::App* cmd, int& target) {
  return cmd->add_option("--nproc", target, "run as N data-parallel processes on this machine (docs/training.md \"More than one process\")")
      ->check(CLI::Range(1, 1024));
}

/// The shared `--precision` option of the reading commands (sample and embed: default auto; inspect: fp32).
inline CLI::Option* add_precision_option(CLI::App* cmd, std::string& target) {
  return cmd->add_option("--precision", target, "matrix products: auto | fp32 | bf16 (auto as in training: bf16 where it measures faster)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "fp32", "bf16"}));
}

/// The operations a reading command's model computes with (model::reading_ops) for a `--precision` value on
/// the device a `--device` spec names, chosen as training chooses (util::choose_precision) and logged (at
/// debug level for an explicit fp32) (cmd_sample.cpp).
std::shared_ptr<const model::Ops> reading_ops(const std::string& precision, const std::string& device_spec);

/// Moves a loaded model to the device a `--device` spec names (resolved with util::resolve_device; throws
/// ConfigError when it is not available) and returns whether it left the CPU (cmd_sample.cpp).
bool move_to_device(model::GptImpl& model, const std::string& spec);

/// Warns, with a count and the distinct characters, when `text` (`what`: "prompt", "--text") holds characters
/// the tokenizer does not know: they become its unknown piece (cmd_sample.cpp).
void warn_unknown_characters(const tokenizer::Tokenizer& tok, const std::string& text, const std::string& what);

/// The `--seed` check: digits only, so "-1" is refused instead of wrapping to 2^64-1.
inline const CLI::Validator kSeedValidator(
    [](std::string& s) {
      return !s.empty() && s.size() <= 20 && s.find_first_not_of("0123456789") == std::string::npos
                 ? std::string()
                 : "expected an integer in [0, 2^64), got '" + s + "'";
    },
    "UINT64");

}  // namespace lm::cli
