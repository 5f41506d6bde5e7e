// FinetuneConfig: YAML section `finetune` (what `lmtrain finetune` freezes and reports).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "model/pool.h"

namespace lm::train {

/// finetune.freeze_embeddings: false = the token table trains; true = it is frozen; old = the rows of the
/// checkpoint's own pieces are frozen and the rows of pieces added by new_pieces train.
enum class EmbeddingFreeze { kNone, kAll, kOld };

/// Parses "false" | "true" | "old"; throws ConfigError otherwise.
EmbeddingFreeze parse_embedding_freeze(std::string_view s);
std::string to_string(EmbeddingFreeze f);

/// finetune.new_rows_init: how the rows of added pieces start. pieces = the mean of the old rows of the pieces
/// the old tokenizer split the piece into (byte pieces too), less its part along the mean row; mean = the mean of all old rows; normal = N(0, 0.02),
/// as pretraining draws them.
enum class NewRowsInit { kPieces, kMean, kNormal };

/// Parses "pieces" | "mean" | "normal"; throws ConfigError otherwise.
NewRowsInit parse_new_rows_init(std::string_view s);
std::string to_string(NewRowsInit i);

/// finetune.objective: next_token = the language-model loss on the text; contrastive = in-batch InfoNCE over
/// pooled line vectors (train/contrastive.h), which turns the model into a sentence encoder.
enum class Objective { kNextToken, kContrastive };
Objective parse_objective(std::string_view s);
std::string to_string(Objective o);

/// finetune.positives: where a contrastive fine-tune's positive pairs come from without finetune.pairs.
/// none = from finetune.pairs; next_line = each line and the next line of the same file.
enum class Positives { kNone, kNextLine };
Positives parse_positives(std::string_view s);
std::string to_string(Positives p);

/// YAML section `finetune` (used by `lmtrain finetune`; ignored by `lmtrain train`).
struct FinetuneConfig {
  std::string from;                  ///< starting checkpoint (set from --from; recorded for resume)
  EmbeddingFreeze freeze_embeddings = EmbeddingFreeze::kNone;  ///< freeze tok_emb.weight (with a tied head: the
                                                              ///< output projection too), or only its old rows
  bool freeze_positions = false;     ///< freeze pos_emb.weight (learned positions)
  std::vector<std::string> freeze;   ///< further parameter-name prefixes to freeze, e.g. "blocks.0."
  bool untie_head = false;           ///< give a tied checkpoint its own head (a copy of the token table), so
                                     ///< the head can train while the input embeddings stay frozen; the
                                     ///< fine-tuned checkpoints record an untied architecture
  double embedding_lr_scale = 1.0;   ///< lr multiplier of trainable tok_emb/pos_emb (e.g. 0.1); (0, 10]
  int64_t unfreeze_embeddings_after = 0;  ///< > 0: the embeddings frozen by freeze_embeddings/freeze_positions
                                          ///< train from step N+1 on (fresh AdamW state, lr x embedding_lr_scale)
  std::string original_val;          ///< original corpus validation text ("" = the checkpoint's data.val)
  int64_t drift_every = 0;           ///< steps between drift reports (0 = only at the end)
  int64_t drift_top_k = 10;          ///< most-moved pieces listed in drift reports
  int64_t new_pieces = 0;            ///< > 0: append up to this many pieces of a tokenizer trained on the new text
  std::string new_pieces_from;       ///< or append the pieces listed in this file, one a line
  NewRowsInit new_rows_init = NewRowsInit::kPieces;  ///< how the added pieces' rows start
  Objective objective = Objective::kNextToken;  ///< what the fine-tune minimises
  model::Pool pool = model::Pool::kMean;        ///< contrastive: how a line's states become its vector (embed's)
  double temperature = 0.05;                    ///< contrastive: InfoNCE's softmax temperature
  std::string pairs;                            ///< contrastive: `anchor<TAB>positive` lines to train on
  std::string val_pairs;                        ///< contrastive with pairs: held-out pairs for validation/retrieval
  Positives positives = Positives::kNone;       ///< contrastive without pairs: next_line
  double lm_weight = 0.0;                       ///< contrastive: weight of the next-token loss on the same lines
};

}  // namespace lm::train
