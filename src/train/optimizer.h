// AdamW with two parameter groups (DESIGN.md "Weight decay"): 2-D matmul weights are decayed; token and
// position embeddings, LayerNorm parameters and biases are not.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "model/gpt.h"
#include "train/train_config.h"

namespace lm::train {

/// Parameter names and tensors of each decay group (trainable parameters only).
struct DecayGroups {
  std::vector<std::string> decay_names, no_decay_names;
  std::vector<torch::Tensor> decay, no_decay;
  int64_t decay_numel = 0, no_decay_numel = 0;
};

/// Splits the model's trainable parameters: decay = 2-D weights other than tok_emb/pos_emb.
DecayGroups split_decay_groups(const model::GptImpl& m);

/// AdamW over both groups: group 0 decays with cfg.weight_decay, group 1 has weight_decay 0.
std::unique_ptr<torch::optim::AdamW> make_adamw(const DecayGroups& groups, const TrainConfig& cfg);

/// Sets the learning rate of every parameter group.
void set_lr(torch::optim::Optimizer& opt, double lr);

}  // namespace lm::train
