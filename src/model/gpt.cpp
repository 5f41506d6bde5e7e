#include "model/gpt.h"

#include <cmath>

#include "model/kernels.h"
#include "model/linear.h"
#include "util/errors.h"
#include "util/text.h"

namespace lm::model {

namespace {

// h W^T for a batch of rows: one GEMM in fp32 (also for a single row, unlike fast_linear), or linear_in.
torch::Tensor logits_of(const torch::Tensor& h, const torch::Tensor& weight, c10::ScalarType dtype) {
  return dtype == torch::kFloat ? torch::nn::functional::linear(h, weight) : linear_in(h, weight, {}, dtype);
}

}  // namespace

GptImpl::GptImpl(const GptConfig& cfg) : cfg_(cfg) {
  if (auto p = cfg.problems(); !p.empty()) throw ConfigError(util::problem_list("[model] invalid architecture:", p));
  const int64_t C = cfg.d_model;
  tok_emb = register_module("tok_emb", torch::nn::Embedding(cfg.vocab_size, C));
  pos_emb = register_module("pos_emb", make_positions(cfg));
  blocks = register_module("blocks", torch::nn::ModuleList());
  for (int64_t i = 0; i < cfg.n_layers; ++i) blocks->push_back(Block(C, cfg.n_heads, cfg.mlp_ratio * C));
  ln_f = register_module("ln_f", torch::nn::LayerNorm(torch::nn::LayerNormOptions({C})));
  if (!cfg.tie_embeddings) {
    head = register_module("head", torch::nn::Linear(torch::nn::LinearOptions(C, cfg.vocab_size).bias(false)));
  }
  init_weights();
}

void GptImpl::init_weights() {
  // GPT-2 (Radford et al. 2019): N(0, 0.02) everywhere, residual projections N(0, 0.02/sqrt(2L)) so the
  // residual stream's variance does not grow with depth; biases 0; LayerNorm 1/0 (its defaults).
  torch::NoGradGuard no_grad;
  const double resid_std = 0.02 / std::sqrt(2.0 * static_cast<double>(cfg_.n_layers));
  for (auto& item : named_parameters()) {
    const std::string& name = item.key();
    torch::Tensor& p = item.value();
    const bool is_ln = name.find("ln") == 0 || name.find(".ln") != std::string::npos;
    if (is_ln || name == "pos_emb.weight") continue;  // LayerNorm keeps 1/0; positions done in ctor
    if (name.size() >= 5 && name.compare(name.size() - 5, 5, ".bias") == 0) {
      p.zero_();
    } else if (name.find("attn.proj.weight") != std::string::npos ||
               name.find("mlp.proj.weight") != std::string::npos) {
      p.normal_(0.0, resid_std);
    } else {
      p.normal_(0.0, 0.02);
    }
  }
}

torch::Tensor GptImpl::output_weight() const { return cfg_.tie_embeddings ? tok_emb->weight : head->weight; }

void GptImpl::set_compute_dtype(c10::ScalarType dtype) {
  compute_dtype_ = dtype;
  for (size_t i = 0; i < blocks->size(); ++i) {
    auto& blk = *blocks[i]->as<BlockImpl>();
    blk.attn->compute_dtype = dtype;
    blk.mlp->compute_dtype = dtype;
  }
}

torch::Tensor GptImpl::forward(const torch::Tensor& idx) { return forward_traced(idx, nullptr); }

torch::Tensor GptImpl::forward_traced(const torch::Tensor& idx, const StageFn& on_stage) {
  auto logits = logits_of(forward_hidden(idx, on_stage), output_weight(), compute_dtype_);  // (B,T,V)
  if (on_stage) on_stage("logits", logits);
  return logits;
}

torch::Tensor GptImpl::loss(const torch::Tensor& idx, const torch::Tensor& targets) {
  auto h = forward_hidden(idx);
  if (compute_dtype_ == torch::kFloat && kernels::applies(h)) {
    return kernels::next_token_loss(h, output_weight(), targets.to(device()));
  }
  return chunked_next_token_loss(h, output_weight(), targets.to(device()), 256, compute_dtype_);
}

torch::Tensor GptImpl::forward_hidden(const torch::Tensor& idx, const StageFn& on_stage) {
  return hidden(idx, nullptr, on_stage);
}

torch::Tensor GptImpl::forward_cached(const torch::Tensor& idx, KvCache& cache) {
  if (cache.layers.empty()) cache.layers.resize(blocks->size());
  auto h = hidden(idx, &cache, nullptr);                               // (B,T,C)
  return linear_in(h.select(1, h.size(1) - 1), output_weight(), {}, compute_dtype_);  // (B,V)
}

torch::Tensor GptImpl::hidden(const torch::Tensor& ids, KvCache* cache, const StageFn& on_stage) {
  const torch::Tensor idx = ids.to(device());  // a no-op when the ids are already there
  auto trace = [&](const char* stage, const torch::Tensor& t) {
    if (on_stage) on_stage(stage, t);
  };
  const int64_t T = idx.size(1), offset = cache ? cache->length() : 0;
  trace("ids", idx);                                                   // (B,T)
  // Fused CPU training: the table's gradient rows go into the tied head's gradient (kernels::embedding).
  const bool fused = cfg_.tie_embeddings && compute_dtype_ == torch::kFloat && kernels::applies(tok_emb->weight);
  auto x = fused ? kernels::embedding(tok_emb->weight, idx) : tok_emb->forward(idx);  // (B,T,C)
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

torch::Tensor next_token_loss(const torch::Tensor& logits, const torch::Tensor& targets) {
  const int64_t V = logits.size(-1);
  return torch::nn::functional::cross_entropy(logits.reshape({-1, V}), targets.reshape({-1}));
}

torch::Tensor chunked_next_token_loss(const torch::Tensor& hidden, const torch::Tensor& weight,
                                      const torch::Tensor& targets, int64_t chunk_rows, c10::ScalarType dtype) {
  const int64_t C = hidden.size(-1);
  auto h = hidden.reshape({-1, C});       // (N,C)
  auto y = targets.reshape({-1});         // (N)
  const int64_t N = h.size(0);
  torch::Tensor total;
  for (int64_t i = 0; i < N; i += chunk_rows) {
    const int64_t n = std::min(chunk_rows, N - i);
    auto logits = logits_of(h.narrow(0, i, n), weight, dtype);  // (n,V) fp32
    auto part = torch::nn::functional::cross_entropy(
        logits, y.narrow(0, i, n), torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum));
    total = total.defined() ? total + part : part;
  }
  return total / static_cast<double>(N);
}

std::vector<std::pair<std::string, torch::Tensor>> named_weights(const torch::nn::Module& m) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& item : m.named_parameters(/*recurse=*/true)) out.emplace_back(item.key(), item.value());
  return out;
}

}  // namespace lm::model
