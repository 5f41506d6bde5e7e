// Fine-tuning policy: which parameters are frozen, when frozen embeddings are unfrozen, and the proof
// (SHA-256 before = after) that frozen tensors did not move. The end-of-run reports (drift, forgetting)
// are made by `lmtrain finetune` in cli/ from inspect/.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model/gpt.h"
#include "tokenizer/extend.h"
#include "train/finetune_config.h"

namespace lm::train {

/// The parameter-name prefixes a FinetuneConfig freezes.
/// SHA-256 (hex) of a tensor's bytes (moved to the CPU, contiguous): the frozen proof's hash.
std::string tensor_sha256(const torch::Tensor& t);

std::vector<std::string> freeze_prefixes(const FinetuneConfig& cfg);

/// `old` (V_old, C: a token table, or an untied head) grown by one row for each of `e`'s pieces, started as
/// `init` says: pieces = the mean of the rows of the piece's `from` ids, less its part along the mean row of old
/// (d = mean/|mean|: row - (row . d) d); mean = the mean of all of old's rows;
/// normal = N(0, 0.02) drawn from a generator seeded with `seed` (+1 for `tensor` head.weight, so an untied
/// head draws its own). The same inputs give the same rows, so a report can compute a piece's initial row
/// again. REQUIRES: old has e.old_vocab rows.
torch::Tensor grow_rows(const torch::Tensor& old, const tokenizer::Extension& e, NewRowsInit init, uint64_t seed,
                        const std::string& tensor);

/// A fine-tune's starting weights (`stored`, by name) with tok_emb.weight and head.weight, where present, grown by
/// grow_rows: what the trainer loads and the forgetting report's "before" model.
void grow_tables(std::map<std::string, torch::Tensor>& stored, const tokenizer::Extension& e, NewRowsInit init,
                 uint64_t seed);

/// The initial rows of the pieces a fine-tune added to `table` (its starting checkpoint's token table or head),
/// as grow_rows made them: the extension recorded beside `tokenizer_model` (the fine-tune's checkpoint's or
/// run's), with the fine-tune's `init` and `seed`. Undefined when that tokenizer added none.
torch::Tensor added_rows_start(const torch::Tensor& table, const std::filesystem::path& tokenizer_model,
                               NewRowsInit init, uint64_t seed, const std::string& tensor);

/// The prefixes frozen only until step `unfreeze_embeddings_after` (the embeddings; none when it is 0).
std::vector<std::string> unfreeze_prefixes(const FinetuneConfig& cfg);

/// The frozen parameters of one run. Freezing sets requires_grad=false (no gradient, so AdamW keeps no
/// state for them); the hashes taken by start() are compared at the unfreeze step and at the end.
class Freezer {
 public:
  /// Freezes every parameter named by a prefix in `freeze` and logs what it froze. The ones also named by
  /// `unfreeze` train again from step `unfreeze_after` + 1. Throws ConfigError for a prefix that matches
  /// no parameter.
  /// `old_rows` > 0 (finetune.freeze_embeddings old): rows [0, old_rows) of tok_emb.weight keep their values
  /// (mask_gradients) while the rest of the table trains; with `unfreeze_after` > 0 they train too from step
  /// `unfreeze_after` + 1.
  Freezer(model::GptImpl& m, const std::vector<std::string>& freeze, const std::vector<std::string>& unfreeze,
          int64_t unfreeze_after, int32_t old_rows = 0);

  /// Zeroes the gradient rows of the frozen old rows (before clipping and the update). AdamW then leaves
  /// them bit-identical: the token table has no weight decay, and their moments stay zero.
  void mask_gradients(model::GptImpl& m) const;

  /// The frozen old rows (0: none, or no longer frozen).
  int32_t frozen_rows() const { return old_rows_; }

  /// Names frozen now but unfrozen later (they join the optimizer's embedding group from the start).
  const std::vector<std::string>& unfrozen_later() const { return later_; }

  /// Records the values to prove against: call once the weights are final for this process (after a
  /// resume load). `first_step` = steps done before this process started.
  void start(const model::GptImpl& m, int64_t first_step);

  /// Before step `step` + 1: unfreezes the `unfreeze` tensors (and frozen old rows) when `step` reached
  /// unfreeze_after, after checking they did not move. Returns true when it unfroze a tensor now (old rows
  /// alone: false, and `rows_unfrozen` set, so that the caller restarts the table's AdamW moments). Throws
  /// Error (internal) when one moved.
  bool unfreeze_if_due(model::GptImpl& m, int64_t step, double embedding_lr_scale, bool* rows_unfrozen = nullptr);

  /// At the end: every still-frozen tensor hashes as at start(). Throws Error (internal) otherwise.
  void check_unchanged(const model::GptImpl& m) const;

 private:
  std::vector<std::string> frozen_, later_;
  std::map<std::string, std::string> hashes_;  ///< name -> SHA-256 at start()
  int64_t unfreeze_after_ = 0, first_step_ = 0;
  int32_t old_rows_ = 0;     ///< tok_emb.weight rows [0, old_rows_) frozen
  bool rows_later_ = false;  ///< ... until unfreeze_after
  std::string rows_hash_;    ///< their SHA-256 at start()
};

}  // namespace lm::train
