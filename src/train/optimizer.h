// AdamW with two parameter groups (docs/ARCHITECTURE.md "Model contract"): 2-D matmul weights are
// decayed; token and position embeddings, LayerNorm parameters and biases are not.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "model/gpt.h"
#include "train/train_config.h"

namespace lm::train {

/// Parameter names and tensors of each optimizer group (trainable parameters only).
struct DecayGroups {
  std::vector<std::string> decay_names, no_decay_names, embedding_names;
  std::vector<torch::Tensor> decay, no_decay, embedding;
  int64_t decay_numel = 0, no_decay_numel = 0, embedding_numel = 0;
  double embedding_lr_scale = 1.0;  ///< lr multiplier of the `embedding` group
  /// Every tensor of the three groups, in group order (the order gradient clipping sees them).
  std::vector<torch::Tensor> all() const;
};

/// Splits the model's trainable parameters: decay = 2-D weights other than tok_emb/pos_emb; the rest is
/// undecayed. With embedding_lr_scale != 1, tok_emb/pos_emb form a third (undecayed) group whose lr is
/// scaled (fine-tuning: finetune.embedding_lr_scale). Frozen parameters named in `trainable_later`
/// (embeddings unfrozen mid-run) join that third group from the start: with no gradient they get no
/// AdamW state until they are unfrozen, and the group layout and parameter order never change, so a
/// resumed run clips and steps exactly as an uninterrupted one.
DecayGroups split_decay_groups(const model::GptImpl& m, double embedding_lr_scale = 1.0,
                               const std::vector<std::string>& trainable_later = {});

/// AdamW: group 0 decays with cfg.weight_decay, group 1 has weight_decay 0, and group 2 (when the
/// embedding group is not empty) has weight_decay 0 and a scaled lr.
std::unique_ptr<torch::optim::AdamW> make_adamw(const DecayGroups& groups, const TrainConfig& cfg);

/// Sets the learning rate of every parameter group (the embedding group gets lr * embedding_lr_scale).
void set_lr(torch::optim::Optimizer& opt, double lr, const DecayGroups& groups);

}  // namespace lm::train
