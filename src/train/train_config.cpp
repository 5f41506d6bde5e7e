#include "train/train_config.h"

#include "util/errors.h"

namespace lm::train {

NonFinitePolicy parse_nonfinite_policy(std::string_view s) {
  if (s == "stop") return NonFinitePolicy::kStop;
  if (s == "skip") return NonFinitePolicy::kSkip;
  throw ConfigError("[train] on_nonfinite: expected stop | skip, got '" + std::string(s) + "'");
}

std::string to_string(NonFinitePolicy p) { return p == NonFinitePolicy::kStop ? "stop" : "skip"; }

OptimizerKind parse_optimizer_kind(std::string_view s) {
  if (s == "adamw") return OptimizerKind::kAdamW;
  if (s == "muon") return OptimizerKind::kMuon;
  throw ConfigError("[train] optimizer: expected adamw | muon, got '" + std::string(s) + "'");
}

std::string to_string(OptimizerKind k) { return k == OptimizerKind::kAdamW ? "adamw" : "muon"; }

}  // namespace lm::train
