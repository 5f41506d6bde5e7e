// Fine-tuning policy: which parameters are frozen, proof that they did not move, and the end-of-run
// reports (embedding drift against the starting checkpoint; validation loss on the new and the original
// corpus before and after: forgetting).
#pragma once

#include <torch/torch.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "model/gpt.h"
#include "train/finetune_config.h"

namespace lm::train {

/// The parameter-name prefixes a FinetuneConfig freezes.
std::vector<std::string> freeze_prefixes(const FinetuneConfig& cfg);

/// The prefixes frozen only until step `unfreeze_embeddings_after` (the embeddings; none when it is 0).
std::vector<std::string> unfreeze_prefixes(const FinetuneConfig& cfg);

/// The names among `names` that start with one of `prefixes`.
std::vector<std::string> names_with_prefix(const std::vector<std::string>& names, const std::vector<std::string>& prefixes);

/// Sets requires_grad=false on every parameter whose name starts with a prefix; returns their names.
/// Throws ConfigError when a prefix matches no parameter.
std::vector<std::string> apply_freeze(model::GptImpl& m, const std::vector<std::string>& prefixes);

/// SHA-256 of the bytes of each named parameter.
std::map<std::string, std::string> hash_parameters(const model::GptImpl& m, const std::vector<std::string>& names);

}  // namespace lm::train
