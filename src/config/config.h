// RunConfig: every section of a run, composed from the structs declared next to their consumers.
// Precedence: built-in defaults < YAML file < --set section.key=value overrides. This is the only code
// that sees yaml-cpp. All problems (unknown keys, wrong types, out-of-range values, cross-field rules) are
// collected and reported at once, each with its location.
#pragma once

#include <cstdint>
#include <filesystem>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "checkpoint/checkpoint_config.h"
#include "dist/dist_config.h"
#include "model/gpt_config.h"
#include "tokenizer/tokenizer_config.h"
#include "train/finetune_config.h"
#include "train/run_config.h"
#include "train/train_config.h"
#include "util/device_config.h"

namespace lm::config {


/// YAML section `data`. Paths are relative to the current working directory.
struct DataSection {
  /// training text (UTF-8, one line = one unit, e.g. a verse): a file, a directory or a glob pattern
  /// (tokenizer::list_corpus_files)
  std::string train;
  /// validation text, the same forms; empty = hold out `val_fraction` of train's lines (one file) or of its
  /// files (several; data/split.h)
  std::string val;
  double val_fraction = 0.05;  ///< share of train's lines (or files) held out when `val` is empty; in (0, 0.5]
  /// ids per shard of the prepared token data; >= 1024. The default is data::kDefaultShardTokens (asserted in
  /// cmd_train.cpp; config/ does not include data/).
  static constexpr int64_t kDefaultShardTokens = int64_t{1} << 27;
  int64_t shard_tokens = kDefaultShardTokens;
  /// line: each line is a unit; paragraph: each blank-line-separated block of lines is joined into one first
  tokenizer::TextUnit unit = tokenizer::TextUnit::kLine;
};

struct RunConfig {
  train::RunSection run;
  DataSection data;
  tokenizer::TokenizerConfig tokenizer;
  model::GptConfig model;  ///< vocab_size is taken from the tokenizer, not from YAML
  train::TrainConfig train;
  checkpoint::CheckpointConfig checkpoint;
  train::FinetuneConfig finetune;  ///< used by `lmtrain finetune`
  dist::DistConfig dist;           ///< used by multi-process runs
  std::set<std::string> explicit_keys;  ///< keys set by the YAML file or --set (not defaults)
};

/// Loads defaults < `yaml_path` (may be empty) < `overrides` ("section.key=value"). Throws ConfigError
/// listing every problem, one per line.
RunConfig load_config(const std::filesystem::path& yaml_path, const std::vector<std::string>& overrides);

/// Same, from YAML text (used by tests and by checkpoints' saved config). `origin` names the source.
RunConfig parse_config(const std::string& yaml_text, const std::string& origin,
                       const std::vector<std::string>& overrides);

/// What a checkpoint says it was fine-tuned for: the finetune section of its config.yaml (`yaml`, as the
/// checkpoint stores it), or the defaults (next_token) when that does not parse.
train::FinetuneConfig checkpoint_finetune(const std::string& yaml);

/// The effective config as YAML, every key present (round-trips through parse_config).
std::string dump_config(const RunConfig& cfg);

/// Keys whose values differ between two configs: (key, value in a, value in b), in documentation order.
std::vector<std::tuple<std::string, std::string, std::string>> diff_configs(const RunConfig& a, const RunConfig& b);

/// All known keys ("section.key") with their default (as --dump-config prints it) and one-line help, in
/// documentation order.
struct KeyInfo {
  std::string key, default_value, help;
};
std::vector<KeyInfo> config_keys();

/// Levenshtein distance, for "did you mean" suggestions.
size_t edit_distance(const std::string& a, const std::string& b);

}  // namespace lm::config
