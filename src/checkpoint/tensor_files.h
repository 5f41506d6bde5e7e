// The tensor files of a checkpoint: model.pt (weights) and optimizer.pt (AdamW state), each a
// name -> tensor dict written with torch::pickle_save, so the bytes depend only on the values.
#pragma once

#include <torch/torch.h>

#include <filesystem>
#include <string>

#include "model/gpt.h"

namespace lm::checkpoint {

/// model.pt bytes: every registered parameter by checkpoint name, as contiguous CPU tensors.
std::string weights_bytes(const model::GptImpl& m);

/// optimizer.pt bytes: "<param>.step", "<param>.exp_avg", "<param>.exp_avg_sq" per parameter that has
/// AdamW state, keyed by parameter *name* (torch::save of an optimizer keys it by tensor addresses, which
/// differ between processes, so its bytes could never match across a resume).
std::string optimizer_bytes(const torch::optim::AdamW& opt, const model::GptImpl& m);

/// Copies the weights in `model_pt` into `model`, checking every name and shape first. With
/// `head_from_tok_emb`, a missing head.weight is taken from the stored tok_emb.weight (untying a tied
/// checkpoint). Throws CheckpointError on a missing, extra or misshapen tensor.
void load_weights(model::GptImpl& model, const std::filesystem::path& model_pt, bool head_from_tok_emb = false);

/// Loads `dir`/optimizer.pt into `opt`, whose parameters are `model`'s (matched by name, shapes checked).
/// Throws CheckpointError when absent, unreadable or mismatched.
void load_optimizer(torch::optim::AdamW& opt, const model::GptImpl& model, const std::filesystem::path& dir);

}  // namespace lm::checkpoint
