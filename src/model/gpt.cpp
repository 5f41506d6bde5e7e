#include "model/gpt.h"

#include <cmath>

#include "util/errors.h"
#include "util/text.h"

namespace lm::model {

GptImpl::GptImpl(const GptConfig& cfg, OpsPtr ops) : cfg_(cfg), ops_(std::move(ops)) {
  if (auto p = cfg.problems(); !p.empty()) throw ConfigError(util::problem_list("[model] invalid architecture:", p));
  const int64_t C = cfg.d_model;
  tok_emb = register_module("tok_emb", torch::nn::Embedding(cfg.vocab_size, C));
  if (auto p = make_positions(cfg)) pos_emb = register_module("pos_emb", p);
  if (cfg.positions == Positions::kRope) {
    rope = register_module("rope", std::make_shared<RotaryImpl>(cfg.max_seq_len, C / cfg.n_heads, cfg.rope_base));
  }
  blocks = register_module("blocks", torch::nn::ModuleList());
  for (int64_t i = 0; i < cfg.n_layers; ++i) blocks->push_back(Block(cfg, ops_, rope));
  ln_f = register_module("ln_f", torch::nn::LayerNorm(torch::nn::LayerNormOptions({C})));
  if (!cfg.tie_embeddings) {
    head = register_module("head", torch::nn::Linear(torch::nn::LinearOptions(C, cfg.vocab_size).bias(false)));
  }
  init_weights();
}

void GptImpl::init_weights() {
  // GPT-2 (Radford et al. 2019), layer by layer: N(0, init_std) for the linear layers and an untied head,
  // N(0, embedding_init_std) for the token table (learned positions were drawn by their own constructor
  // with it); the residual projections (attention's and the MLP's output) N(0, init_std/sqrt(2L)) so the
  // residual stream's variance does not grow with depth, or zero with zero_init_proj (nanochat: each block
  // starts as the identity); biases 0; LayerNorm 1/0 (its defaults). The draws run in registration order
  // and a zeroed projection is drawn first, so every option leaves the other tensors' bits as they were.
  torch::NoGradGuard no_grad;
  const double std = cfg_.init_std, resid_std = std / std::sqrt(2.0 * static_cast<double>(cfg_.n_layers));
  auto init = [](const torch::nn::Linear& l, double s) {
    l->weight.normal_(0.0, s);
    if (l->bias.defined()) l->bias.zero_();
  };
  auto init_proj = [&](const torch::nn::Linear& l) {
    init(l, resid_std);
    if (cfg_.zero_init_proj) l->weight.zero_();
  };
  tok_emb->weight.normal_(0.0, cfg_.embedding_init_std);
  for (size_t i = 0; i < blocks->size(); ++i) {
    auto& blk = *blocks[i]->as<BlockImpl>();
    init(blk.attn->qkv, std);
    init_proj(blk.attn->proj);
    init(blk.mlp->fc, std);
    init_proj(blk.mlp->proj);
  }
  if (head) init(head, std);
}

torch::Tensor GptImpl::logits_of(const torch::Tensor& hidden) const {
  return soft_cap(ops_->linear(hidden, output_weight(), {}), cfg_.logit_softcap);  // (..., V)
}

torch::Tensor GptImpl::output_weight() const { return cfg_.tie_embeddings ? tok_emb->weight : head->weight; }

torch::Tensor GptImpl::forward(const torch::Tensor& idx, const torch::Tensor& targets, const StageFn& on_stage) {
  auto h = forward_hidden(idx, on_stage);                                                  // (B,T,C)
  if (targets.defined()) {
    return ops_->next_token_loss(h, output_weight(), targets.to(device()), cfg_.logit_softcap);  // ()
  }
  auto logits = logits_of(h);                                                              // (B,T,V)
  if (on_stage) on_stage("logits", logits);
  return logits;
}

torch::Tensor GptImpl::forward_hidden(const torch::Tensor& idx, const StageFn& on_stage) {
  return hidden(idx, nullptr, on_stage);
}

torch::Tensor GptImpl::forward_cached(const torch::Tensor& idx, KvCache& cache) {
  if (cache.layers.empty()) cache.layers.resize(blocks->size());
  auto h = hidden(idx, &cache, nullptr);                               // (B,T,C)
  return logits_of(h.select(1, h.size(1) - 1));                        // (B,V)
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
  if (pos_emb) {
    x = x + pos_emb->forward(T, offset).unsqueeze(0);                  // (B,T,C)
    trace("+pos_emb", x);
  }
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
