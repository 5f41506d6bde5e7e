#include "model/gpt.h"

#include <cmath>

#include "util/errors.h"
#include "util/text.h"

namespace lm::model {

GptImpl::GptImpl(const GptConfig& cfg, OpsPtr ops) : cfg_(cfg), ops_(std::move(ops)) {
  if (auto p = cfg.problems(); !p.empty()) throw ConfigError(util::problem_list("[model] invalid architecture:", p));
  const int64_t C = cfg.d_model;
  tok_emb = register_module("tok_emb", torch::nn::Embedding(cfg.vocab_size, C));
  pos_emb = register_module("pos_emb", make_positions(cfg));
  blocks = register_module("blocks", torch::nn::ModuleList());
  for (int64_t i = 0; i < cfg.n_layers; ++i) blocks->push_back(Block(C, cfg.n_heads, cfg.mlp_ratio * C, cfg.mlp_activation, ops_));
  ln_f = register_module("ln_f", torch::nn::LayerNorm(torch::nn::LayerNormOptions({C})));
  if (!cfg.tie_embeddings) {
    head = register_module("head", torch::nn::Linear(torch::nn::LinearOptions(C, cfg.vocab_size).bias(false)));
  }
  init_weights();
}

void GptImpl::init_weights() {
  // GPT-2 (Radford et al. 2019), layer by layer: N(0, 0.02) for the token table, the linear layers and an
  // untied head; the residual projections (attention's and the MLP's output) N(0, 0.02/sqrt(2L)) so the
  // residual stream's variance does not grow with depth; biases 0; LayerNorm 1/0 (its defaults); learned
  // positions were drawn by their own constructor. The draws run in registration order (the order of the
  // random numbers is part of a seed's result).
  torch::NoGradGuard no_grad;
  const double std = 0.02, resid_std = std / std::sqrt(2.0 * static_cast<double>(cfg_.n_layers));
  auto init = [](const torch::nn::Linear& l, double s) {
    l->weight.normal_(0.0, s);
    if (l->bias.defined()) l->bias.zero_();
  };
  tok_emb->weight.normal_(0.0, std);
  for (size_t i = 0; i < blocks->size(); ++i) {
    auto& blk = *blocks[i]->as<BlockImpl>();
    init(blk.attn->qkv, std);
    init(blk.attn->proj, resid_std);
    init(blk.mlp->fc, std);
    init(blk.mlp->proj, resid_std);
  }
  if (head) init(head, std);
}

torch::Tensor GptImpl::output_weight() const { return cfg_.tie_embeddings ? tok_emb->weight : head->weight; }

torch::Tensor GptImpl::forward(const torch::Tensor& idx, const torch::Tensor& targets, const StageFn& on_stage) {
  auto h = forward_hidden(idx, on_stage);                                                  // (B,T,C)
  if (targets.defined()) return ops_->next_token_loss(h, output_weight(), targets.to(device()));  // ()
  auto logits = ops_->linear(h, output_weight(), {});                                     // (B,T,V)
  if (on_stage) on_stage("logits", logits);
  return logits;
}

torch::Tensor GptImpl::forward_hidden(const torch::Tensor& idx, const StageFn& on_stage) {
  return hidden(idx, nullptr, on_stage);
}

torch::Tensor GptImpl::forward_cached(const torch::Tensor& idx, KvCache& cache) {
  if (cache.layers.empty()) cache.layers.resize(blocks->size());
  auto h = hidden(idx, &cache, nullptr);                               // (B,T,C)
  return ops_->linear(h.select(1, h.size(1) - 1), output_weight(), {});  // (B,V)
}

torch::Tensor GptImpl::hidden(const torch::Tensor& ids, KvCache* cache, const StageFn& on_stage) {
  const torch::Tensor idx = ids.to(device());  // a no-op when the ids are already there
  auto trace = [&](const char* stage, const torch::Tensor& t) {
    if (on_stage) on_stage(stage, t);
  };
  const int64_t T = idx.size(1), offset = cache ? cache->length() : 0;
  trace("ids", idx);                                                   // (B,T)
  auto x = ops_->embedding(tok_emb->weight, idx);                      // (B,T,C)
  if (cfg_.embedding_scale == EmbeddingScale::kSqrtD) x = x * std::sqrt(static_cast<double>(cfg_.d_model));
  trace("tok_emb", x);
  x = x + pos_emb->forward(T, offset).unsqueeze(0);                    // (B,T,C)
  trace("+pos_emb", x);
  for (size_t i = 0; i < blocks->size(); ++i) {
    x = blocks[i]->as<BlockImpl>()->forward(x, cache ? &cache->layers[i] : nullptr);  // (B,T,C)
    trace(("blocks." + std::to_string(i)).c_str(), x);
  }
  x = ln_f->forward(x);                                                // (B,T,C)
  trace("ln_f", x);
  return x;
}

KvCache KvCache::clone() const {
  KvCache out;
  for (const auto& l : layers) out.layers.push_back(l.clone());
  return out;
}

std::vector<std::pair<std::string, torch::Tensor>> named_weights(const torch::nn::Module& m) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& item : m.named_parameters(/*recurse=*/true)) out.emplace_back(item.key(), item.value());
  return out;
}

}  // namespace lm::model
