#include "train/finetune.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "util/errors.h"
#include "util/hash.h"
#include "util/text.h"

namespace lm::train {

namespace {

bool has_prefix(const std::string& name, const std::vector<std::string>& prefixes) {
  return std::any_of(prefixes.begin(), prefixes.end(), [&](const std::string& p) { return name.rfind(p, 0) == 0; });
}

// Sets requires_grad=false on every parameter whose name starts with a prefix; returns their names.
std::vector<std::string> apply_freeze(model::GptImpl& m, const std::vector<std::string>& prefixes) {
  std::vector<std::string> frozen;
  for (const auto& prefix : prefixes) {
    bool matched = false;
    for (auto& [name, p] : model::named_weights(m)) {
      if (name.rfind(prefix, 0) != 0) continue;
      matched = true;
      if (p.requires_grad()) {
        p.requires_grad_(false);
        frozen.push_back(name);
      }
    }
    if (!matched) {
      throw ConfigError("[finetune] freeze: expected a prefix of some parameter name, got '" + prefix +
                        "'. Hint: names are listed in docs/formats.md (e.g. tok_emb., pos_emb., blocks.0.).");
    }
  }
  return frozen;
}

bool contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// SHA-256 of the bytes of each named parameter.
std::map<std::string, std::string> hash_parameters(const model::GptImpl& m, const std::vector<std::string>& names) {
  std::map<std::string, std::string> out;
  for (auto& [name, p] : model::named_weights(m)) {
    if (contains(names, name)) out[name] = tensor_sha256(p);
  }
  return out;
}

}  // namespace

std::string tensor_sha256(const torch::Tensor& p) {
  auto t = p.detach().cpu().contiguous();
  return util::sha256_hex(std::string_view(static_cast<const char*>(t.data_ptr()), t.nbytes()));
}

std::vector<std::string> freeze_prefixes(const FinetuneConfig& cfg) {
  std::vector<std::string> out = cfg.freeze;
  if (cfg.freeze_embeddings) out.push_back("tok_emb.");
  if (cfg.freeze_positions) out.push_back("pos_emb.");
  return out;
}

std::vector<std::string> unfreeze_prefixes(const FinetuneConfig& cfg) {
  std::vector<std::string> out;
  if (cfg.unfreeze_embeddings_after <= 0) return out;
  // a table frozen by an explicit `freeze` prefix as well stays frozen
  if (cfg.freeze_embeddings && !has_prefix("tok_emb.weight", cfg.freeze)) out.push_back("tok_emb.");
  if (cfg.freeze_positions && !has_prefix("pos_emb.weight", cfg.freeze)) out.push_back("pos_emb.");
  return out;
}

Freezer::Freezer(model::GptImpl& m, const std::vector<std::string>& freeze, const std::vector<std::string>& unfreeze,
                 int64_t unfreeze_after)
    : frozen_(apply_freeze(m, freeze)), unfreeze_after_(unfreeze_after) {
  for (const auto& name : frozen_) {
    if (has_prefix(name, unfreeze)) later_.push_back(name);
  }
  if (frozen_.empty()) return;
  int64_t n_frozen = 0, n_trainable = 0;
  for (auto& [name, p] : model::named_weights(m)) (p.requires_grad() ? n_trainable : n_frozen) += p.numel();
  spdlog::info("frozen: {} parameters ({}); trainable: {} parameters", n_frozen, util::join(frozen_, ", "), n_trainable);
  if (m.config().tie_embeddings && contains(frozen_, "tok_emb.weight")) {
    spdlog::info("tied head: freezing tok_emb.weight also freezes the output projection (logits use the same matrix)");
  }
}

void Freezer::start(const model::GptImpl& m, int64_t first_step) {
  first_step_ = first_step;
  hashes_ = hash_parameters(m, frozen_);
}

// The frozen proof of the unfrozen tensors ends here. A process resumed at or past the unfreeze step has
// nothing to prove: the tensors trained before it started.
bool Freezer::unfreeze_if_due(model::GptImpl& m, int64_t step, double embedding_lr_scale) {
  if (later_.empty() || step < unfreeze_after_) return false;
  const bool resumed_past = first_step_ >= unfreeze_after_;
  const auto now = hash_parameters(m, later_);
  for (const auto& name : later_) {
    if (!resumed_past && hashes_.at(name) != now.at(name)) {
      throw Error(ExitCode::kInternal, "[finetune] frozen tensor " + name + " changed before it was unfrozen");
    }
    hashes_.erase(name);
    frozen_.erase(std::find(frozen_.begin(), frozen_.end(), name));
  }
  for (auto& [name, p] : model::named_weights(m)) {
    if (contains(later_, name)) p.requires_grad_(true);
  }
  const bool tied_head = m.config().tie_embeddings && contains(later_, "tok_emb.weight");
  if (resumed_past) {
    spdlog::info("resumed at step {}, at or after the unfreeze at step {}: {} trains", first_step_, unfreeze_after_,
                 util::join(later_, ", "));
  } else {
    spdlog::info("step {}: unfroze {} (SHA-256 unchanged over steps {}-{}); it trains from here at {} x lr{}", step,
                 util::join(later_, ", "), first_step_ + 1, step, embedding_lr_scale,
                 tied_head ? ", and with it the tied output projection" : "");
  }
  later_.clear();
  return true;
}

void Freezer::check_unchanged(const model::GptImpl& m) const {
  if (frozen_.empty()) return;
  if (hash_parameters(m, frozen_) != hashes_) {
    throw Error(ExitCode::kInternal, "[finetune] a frozen tensor changed during training");
  }
  spdlog::info("frozen tensors unchanged (SHA-256 before = after): {} tensor(s)", frozen_.size());
}

}  // namespace lm::train
