// The training job: tokenizer and token files (made when missing or stale), model, AdamW loop with
// warmup+cosine lr, gradient clipping, periodic validation and checkpoints, final full validation.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_config.h"
#include "model/gpt_config.h"
#include "tokenizer/tokenizer.h"
#include "train/train_config.h"

namespace lm::model {
class GptImpl;
}

namespace lm::train {

/// Everything a training run needs, as typed values (cli/ builds it from the RunConfig).
struct TrainJob {
  std::filesystem::path run_dir;
  uint64_t seed = 1337;
  int threads = 1;
  std::filesystem::path train_text, val_text;
  tokenizer::TokenizerConfig tokenizer;
  model::GptConfig model;  ///< vocab_size is overwritten with the tokenizer's
  TrainConfig train;
  checkpoint::CheckpointConfig checkpoint;
  std::string config_yaml;  ///< effective config, saved in the run dir and every checkpoint
  bool overwrite = false;   ///< replace checkpoints already in run_dir (otherwise that is an error)
  std::string resume;       ///< "" = fresh, "auto" = newest valid checkpoint in run_dir, else a path

  // Fine-tuning (set by `lmtrain finetune`):
  std::filesystem::path init_from;  ///< start from this checkpoint's weights and tokenizer (not trained anew)
  std::vector<std::string> freeze;  ///< parameter-name prefixes frozen (requires_grad=false, no optimizer state)
  double embedding_lr_scale = 1.0;  ///< lr multiplier for tok_emb/pos_emb
  std::vector<std::string> unfreeze;  ///< prefixes (among `freeze`) that train again after `unfreeze_after` steps
  int64_t unfreeze_after = 0;
  /// Called every `report_every` steps (final=false) and after the final validation (final=true).
  std::function<void(model::GptImpl& model, int64_t step, bool final)> on_report;
  int64_t report_every = 0;
};

struct TrainResult {
  int64_t steps = 0;
  bool early_stopped = false;
  double final_val_loss = 0.0;  ///< over the whole validation file, nats/token
  std::filesystem::path checkpoint;
};

/// Paths of the artefacts inside a run directory.
struct RunPaths {
  explicit RunPaths(const std::filesystem::path& dir)
      : tokenizer(dir / "tokenizer.model"), train_bin(dir / "train.bin"), val_bin(dir / "val.bin") {}
  std::filesystem::path tokenizer, train_bin, val_bin;
};

/// Makes the tokenizer and token files of a run when missing or stale (logged). Safe to call repeatedly.
void prepare_run_data(const TrainJob& job);

/// Runs (or resumes) the job to max_steps or early stop. On SIGINT/SIGTERM it finishes the step, saves,
/// and throws Interrupted. Throws DataError, CheckpointError, NonFiniteError, SaveError, ...
TrainResult run_training(const TrainJob& job);

}  // namespace lm::train
