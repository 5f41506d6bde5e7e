#include "train/finetune.h"

#include <algorithm>

#include "util/errors.h"
#include "util/hash.h"

namespace lm::train {

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
  auto listed = [&](const std::string& name) {
    return std::any_of(cfg.freeze.begin(), cfg.freeze.end(), [&](const std::string& p) { return name.rfind(p, 0) == 0; });
  };
  if (cfg.freeze_embeddings && !listed("tok_emb.weight")) out.push_back("tok_emb.");
  if (cfg.freeze_positions && !listed("pos_emb.weight")) out.push_back("pos_emb.");
  return out;
}

std::vector<std::string> names_with_prefix(const std::vector<std::string>& names, const std::vector<std::string>& prefixes) {
  std::vector<std::string> out;
  for (const auto& n : names) {
    if (std::any_of(prefixes.begin(), prefixes.end(), [&](const std::string& p) { return n.rfind(p, 0) == 0; })) {
      out.push_back(n);
    }
  }
  return out;
}

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
                        "'. Hint: names are listed in README.md (e.g. tok_emb., pos_emb., blocks.0.).");
    }
  }
  return frozen;
}

std::map<std::string, std::string> hash_parameters(const model::GptImpl& m, const std::vector<std::string>& names) {
  std::map<std::string, std::string> out;
  for (auto& [name, p] : model::named_weights(m)) {
    if (std::find(names.begin(), names.end(), name) == names.end()) continue;
    auto t = p.detach().cpu().contiguous();
    out[name] = util::sha256_hex(std::string_view(static_cast<const char*>(t.data_ptr()), t.nbytes()));
  }
  return out;
}

}  // namespace lm::train
