// FinetuneConfig: YAML section `finetune` (what `lmtrain finetune` freezes and reports).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lm::train {

/// YAML section `finetune` (used by `lmtrain finetune`; ignored by `lmtrain train`).
struct FinetuneConfig {
  std::string from;                  ///< starting checkpoint (set from --from; recorded for resume)
  bool freeze_embeddings = false;    ///< freeze tok_emb.weight (with a tied head: the output projection too)
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
};

}  // namespace lm::train
