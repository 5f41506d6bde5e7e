// TrainJob: everything one training or fine-tuning run needs, as typed values (cli/ builds it from the
// RunConfig), and TrainResult, what the run reports back.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_config.h"
#include "data/split.h"
#include "data/token_file.h"
#include "model/gpt_config.h"
#include "tokenizer/corpus_text.h"
#include "tokenizer/extend.h"
#include "tokenizer/tokenizer_config.h"
#include "train/contrastive.h"
#include "train/finetune_config.h"
#include "train/run_config.h"
#include "train/train_config.h"
#include "util/device_config.h"

namespace lm::model {
class GptImpl;
}
namespace lm::dist {
class Group;
}

namespace lm::train {

/// What a start may do to an earlier run's checkpoints in its run directory (`--overwrite`).
enum class Overwrite { kRefuse, kDelete };

/// A fine-tune report during the run (every report_every steps) or the final one (after the final validation).
enum class ReportKind { kPeriodic, kFinal };

struct TrainJob {
  RunSection run;  ///< the config's `run` section as parsed (run.device is resolved at the start)
  std::filesystem::path run_dir() const { return run.dir; }
  /// The corpus files (data.train / data.val listed by tokenizer::list_corpus_files).
  tokenizer::CorpusFiles train_files, val_files;
  /// Set when the config names no validation text and data.train is one file: the run holds out lines of
  /// this source and writes the two parts as train_files and val_files (run_dir/train.txt, run_dir/val.txt)
  /// before preparing token files. (A many-file data.train holds out whole files instead: data::hold_out_files.)
  std::optional<data::SplitSpec> split;
  uint64_t shard_tokens = data::kDefaultShardTokens;  ///< data.shard_tokens
  /// data.unit. With paragraph, the files above are joined copies in run_dir/paragraphs/ (rank 0 writes them
  /// first: prepare_run_text), each made from the corpus file beside it here.
  tokenizer::TextUnit unit = tokenizer::TextUnit::kLine;
  std::vector<std::pair<std::filesystem::path, std::filesystem::path>> paragraph_copies;  ///< {corpus file, copy}
  tokenizer::TokenizerConfig tokenizer;
  model::GptConfig model;  ///< vocab_size is overwritten with the tokenizer's
  TrainConfig train;
  checkpoint::CheckpointConfig checkpoint;
  std::string config_yaml;  ///< effective config, saved in the run dir and every checkpoint
  Overwrite overwrite = Overwrite::kRefuse;  ///< an earlier run's checkpoints in run_dir: an error, or deleted
  /// The verified checkpoint to continue from (select_resume_checkpoint chose it); empty = a fresh start.
  std::filesystem::path resume_from;

  // Fine-tuning (set by `lmtrain finetune`):
  std::filesystem::path init_from;  ///< start from this checkpoint's weights and tokenizer (not trained anew)
  std::vector<std::string> freeze;  ///< parameter-name prefixes frozen (requires_grad=false, no optimizer state)
  double embedding_lr_scale = 1.0;  ///< lr multiplier for tok_emb/pos_emb
  std::vector<std::string> unfreeze;  ///< prefixes (among `freeze`) that train again after `unfreeze_after` steps
  int64_t unfreeze_after = 0;
  /// finetune.new_pieces / new_pieces_from: the run's tokenizer is init_from's with pieces appended
  /// (tokenizer/extend.h), and the rows of the added pieces start as new_rows_init says.
  tokenizer::ExtensionSpec new_pieces;
  NewRowsInit new_rows_init = NewRowsInit::kPieces;
  /// finetune.freeze_embeddings old: the token table's rows of the checkpoint's own pieces keep their values
  /// (their gradient rows are zeroed before each update) until unfreeze_after, when it is > 0.
  bool freeze_old_rows = false;
  /// finetune.objective contrastive: the steps minimise InfoNCE over these pairs instead of the next-token
  /// loss, and validation measures it on the held-out pairs (train/contrastive.h).
  std::optional<ContrastiveSpec> contrastive;
  /// Called every `report_every` steps (kPeriodic) and after the final validation (kFinal).
  std::function<void(model::GptImpl& model, int64_t step, ReportKind kind)> on_report;
  int64_t report_every = 0;

  /// The process group of a multi-process run (borrowed; cli/ owns it), or null for one process.
  dist::Group* group = nullptr;
};

struct TrainResult {
  int64_t steps = 0;
  bool early_stopped = false;
  double final_val_loss = 0.0;  ///< over the whole validation file, nats/token
  double final_val_bpb = 0.0;   ///< the same in bits per UTF-8 byte (train/evaluate.h)
  std::filesystem::path checkpoint;
};

}  // namespace lm::train
