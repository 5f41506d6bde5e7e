#include "train/finetune.h"

#include <spdlog/spdlog.h>

#include <ATen/CPUGeneratorImpl.h>

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

EmbeddingFreeze parse_embedding_freeze(std::string_view s) {
  // YAML's own spellings of a boolean, as the key took when it was one
  for (const char* no : {"false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF", "n", "N"}) {
    if (s == no) return EmbeddingFreeze::kNone;
  }
  for (const char* yes : {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON", "y", "Y"}) {
    if (s == yes) return EmbeddingFreeze::kAll;
  }
  if (s == "old") return EmbeddingFreeze::kOld;
  throw ConfigError("[finetune] freeze_embeddings: expected false | true | old, got '" + std::string(s) + "'");
}

std::string to_string(EmbeddingFreeze f) {
  return f == EmbeddingFreeze::kNone ? "false" : f == EmbeddingFreeze::kAll ? "true" : "old";
}

NewRowsInit parse_new_rows_init(std::string_view s) {
  if (s == "pieces") return NewRowsInit::kPieces;
  if (s == "mean") return NewRowsInit::kMean;
  if (s == "normal") return NewRowsInit::kNormal;
  throw ConfigError("[finetune] new_rows_init: expected pieces | mean | normal, got '" + std::string(s) + "'");
}

Objective parse_objective(std::string_view s) {
  if (s == "next_token") return Objective::kNextToken;
  if (s == "contrastive") return Objective::kContrastive;
  throw ConfigError("[finetune] objective: expected next_token | contrastive, got '" + std::string(s) + "'");
}

std::string to_string(Objective o) { return o == Objective::kNextToken ? "next_token" : "contrastive"; }

Positives parse_positives(std::string_view s) {
  if (s == "none") return Positives::kNone;
  if (s == "next_line") return Positives::kNextLine;
  throw ConfigError("[finetune] positives: expected none | next_line, got '" + std::string(s) + "'");
}

std::string to_string(Positives p) { return p == Positives::kNone ? "none" : "next_line"; }

std::string to_string(NewRowsInit i) {
  return i == NewRowsInit::kPieces ? "pieces" : i == NewRowsInit::kMean ? "mean" : "normal";
}

torch::Tensor grow_rows(const torch::Tensor& old, const tokenizer::Extension& e, NewRowsInit init, uint64_t seed,
                        const std::string& tensor) {
  torch::NoGradGuard no_grad;
  const auto table = old.detach().cpu().to(torch::kFloat);  // (V_old, C)
  const int64_t n = static_cast<int64_t>(e.pieces.size()), C = table.size(1);
  torch::Tensor rows;  // (n, C)
  if (init == NewRowsInit::kNormal) {
    auto gen = at::detail::createCPUGenerator(seed + (tensor == "head.weight" ? 1 : 0));  // a head's own draw
    rows = torch::randn({n, C}, gen, torch::kFloat) * 0.02;
  } else if (init == NewRowsInit::kMean) {
    rows = table.mean(0, /*keepdim=*/true).expand({n, C}).clone();
  } else {
    rows = torch::empty({n, C}, torch::kFloat);
    for (int64_t i = 0; i < n; ++i) {
      const auto& from = e.pieces[static_cast<size_t>(i)].from;
      auto ids = torch::tensor(std::vector<int64_t>(from.begin(), from.end()), torch::kInt64);
      rows[i] = table.index_select(0, ids).mean(0);
    }
    // Every row shares the mean row's direction, and with the rows scoring the next token (a tied table or a
    // head) the softmax made it a frequency prior: the pieces of a new word are improbable where it starts
    // (bytes never trained on, word ends), so their mean would start the word improbable too. The new rows keep
    // what sets their old pieces apart and drop that shared part.
    const auto d = table.mean(0) / table.mean(0).norm();
    rows -= torch::outer(rows.matmul(d), d);
  }
  return torch::cat({table, rows}, 0).to(old.device());
}

void grow_tables(std::map<std::string, torch::Tensor>& stored, const tokenizer::Extension& e, NewRowsInit init,
                 uint64_t seed) {
  for (const std::string name : {"tok_emb.weight", "head.weight"}) {
    if (auto it = stored.find(name); it != stored.end()) it->second = grow_rows(it->second, e, init, seed, name);
  }
}

torch::Tensor added_rows_start(const torch::Tensor& table, const std::filesystem::path& tokenizer_model,
                               NewRowsInit init, uint64_t seed, const std::string& tensor) {
  const auto e = tokenizer::read_extension(tokenizer_model);
  if (e.old_vocab == 0 || table.size(0) != e.old_vocab) return {};
  return grow_rows(table, e, init, seed, tensor).narrow(0, e.old_vocab, static_cast<int64_t>(e.pieces.size()));
}

std::vector<std::string> freeze_prefixes(const FinetuneConfig& cfg) {
  std::vector<std::string> out = cfg.freeze;
  if (cfg.freeze_embeddings == EmbeddingFreeze::kAll) out.push_back("tok_emb.");
  if (cfg.freeze_positions) out.push_back("pos_emb.");
  return out;
}

std::vector<std::string> unfreeze_prefixes(const FinetuneConfig& cfg) {
  std::vector<std::string> out;
  if (cfg.unfreeze_embeddings_after <= 0) return out;
  // a table frozen by an explicit `freeze` prefix as well stays frozen
  if (cfg.freeze_embeddings == EmbeddingFreeze::kAll && !has_prefix("tok_emb.weight", cfg.freeze)) out.push_back("tok_emb.");
  if (cfg.freeze_positions && !has_prefix("pos_emb.weight", cfg.freeze)) out.push_back("pos_emb.");
  return out;
}

Freezer::Freezer(model::GptImpl& m, const std::vector<std::string>& freeze, const std::vector<std::string>& unfreeze,
                 int64_t unfreeze_after, int32_t old_rows)
    : frozen_(apply_freeze(m, freeze)), unfreeze_after_(unfreeze_after), old_rows_(old_rows) {
  for (const auto& name : frozen_) {
    if (has_prefix(name, unfreeze)) later_.push_back(name);
  }
  if (old_rows_ > 0) {
    if (!m.tok_emb->weight.requires_grad()) {
      throw ConfigError("[finetune] freeze_embeddings old: expected tok_emb.weight to train (its added rows), got it "
                        "frozen by finetune.freeze. Hint: drop tok_emb. from finetune.freeze.");
    }
    rows_later_ = unfreeze_after_ > 0;
    const int64_t V = m.tok_emb->weight.size(0), C = m.tok_emb->weight.size(1);
    spdlog::info("frozen: the {} rows of the checkpoint's pieces in tok_emb.weight ({} parameters{}); the {} rows of "
                 "added pieces train{}", old_rows_, old_rows_ * C,
                 m.config().tie_embeddings ? ", with them the tied head's" : "", V - old_rows_,
                 rows_later_ ? fmt::format(", and all rows from step {}", unfreeze_after_ + 1) : std::string());
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
  if (old_rows_ > 0) rows_hash_ = tensor_sha256(m.tok_emb->weight.narrow(0, 0, old_rows_));
}

void Freezer::mask_gradients(model::GptImpl& m) const {
  if (old_rows_ == 0) return;
  auto g = m.tok_emb->weight.grad();
  if (g.defined()) g.narrow(0, 0, old_rows_).zero_();
}

// The frozen proof of the unfrozen tensors ends here. A process resumed at or past the unfreeze step has
// nothing to prove: the tensors trained before it started.
bool Freezer::unfreeze_if_due(model::GptImpl& m, int64_t step, double embedding_lr_scale, bool* rows_unfrozen) {
  const bool resumed_past = first_step_ >= unfreeze_after_;
  if (rows_later_ && step >= unfreeze_after_) {
    // A process resumed at the unfreeze step itself restarts the moments as the straight run does; one resumed
    // later has them, the whole table's, in its checkpoint.
    const bool rows_past = first_step_ > unfreeze_after_;
    if (!rows_past && tensor_sha256(m.tok_emb->weight.narrow(0, 0, old_rows_)) != rows_hash_) {
      throw Error(ExitCode::kInternal, "[finetune] frozen rows of tok_emb.weight changed before they were unfrozen");
    }
    if (rows_past) {
      spdlog::info("resumed at step {}, after the unfreeze at step {}: every row of tok_emb.weight trains",
                   first_step_, unfreeze_after_);
    } else {
      spdlog::info("step {}: unfroze the {} old rows of tok_emb.weight (SHA-256 unchanged over steps {}-{}); the whole "
                   "table trains from here, its AdamW moments started afresh", step, old_rows_, first_step_ + 1, step);
    }
    if (rows_unfrozen) *rows_unfrozen = !rows_past;
    old_rows_ = 0;
    rows_later_ = false;
  }
  if (later_.empty() || step < unfreeze_after_) return false;
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
  if (old_rows_ > 0) {
    if (tensor_sha256(m.tok_emb->weight.narrow(0, 0, old_rows_)) != rows_hash_) {
      throw Error(ExitCode::kInternal, "[finetune] a frozen row of tok_emb.weight changed during training");
    }
    spdlog::info("frozen rows unchanged (SHA-256 before = after): tok_emb.weight rows 0-{}", old_rows_ - 1);
  }
  if (frozen_.empty()) return;
  if (hash_parameters(m, frozen_) != hashes_) {
    throw Error(ExitCode::kInternal, "[finetune] a frozen tensor changed during training");
  }
  spdlog::info("frozen tensors unchanged (SHA-256 before = after): {} tensor(s)", frozen_.size());
}

}  // namespace lm::train
