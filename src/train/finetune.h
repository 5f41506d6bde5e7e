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
#include "train/finetune_config.h"

namespace lm::train {

/// The parameter-name prefixes a FinetuneConfig freezes.
/// SHA-256 (hex) of a tensor's bytes (moved to the CPU, contiguous): the frozen proof's hash.
std::string tensor_sha256(const torch::Tensor& t);

std::vector<std::string> freeze_prefixes(const FinetuneConfig& cfg);

/// The prefixes frozen only until step `unfreeze_embeddings_after` (the embeddings; none when it is 0).
std::vector<std::string> unfreeze_prefixes(const FinetuneConfig& cfg);

/// The frozen parameters of one run. Freezing sets requires_grad=false (no gradient, so AdamW keeps no
/// state for them); the hashes taken by start() are compared at the unfreeze step and at the end.
class Freezer {
 public:
  /// Freezes every parameter named by a prefix in `freeze` and logs what it froze. The ones also named by
  /// `unfreeze` train again from step `unfreeze_after` + 1. Throws ConfigError for a prefix that matches
  /// no parameter.
  Freezer(model::GptImpl& m, const std::vector<std::string>& freeze, const std::vector<std::string>& unfreeze,
          int64_t unfreeze_after);

  /// Names frozen now but unfrozen later (they join the optimizer's embedding group from the start).
  const std::vector<std::string>& unfrozen_later() const { return later_; }

  /// Records the values to prove against: call once the weights are final for this process (after a
  /// resume load). `first_step` = steps done before this process started.
  void start(const model::GptImpl& m, int64_t first_step);

  /// Before step `step` + 1: unfreezes the `unfreeze` tensors when `step` reached unfreeze_after, after
  /// checking they did not move. Returns true when it unfroze something now. Throws Error (internal) when
  /// one moved.
  bool unfreeze_if_due(model::GptImpl& m, int64_t step, double embedding_lr_scale);

  /// At the end: every still-frozen tensor hashes as at start(). Throws Error (internal) otherwise.
  void check_unchanged(const model::GptImpl& m) const;

 private:
  std::vector<std::string> frozen_, later_;
  std::map<std::string, std::string> hashes_;  ///< name -> SHA-256 at start()
  int64_t unfreeze_after_ = 0, first_step_ = 0;
};

}  // namespace lm::train
