#include "sample/sampler.h"

#include <random>

#include "util/errors.h"

namespace lm::sample {
namespace {

torch::Tensor last_logits(model::GptImpl& model, const std::vector<int32_t>& context) {
  const int64_t T = model.config().max_seq_len;
  const size_t start = context.size() > static_cast<size_t>(T) ? context.size() - static_cast<size_t>(T) : 0;
  std::vector<int64_t> ids(context.begin() + static_cast<std::ptrdiff_t>(start), context.end());
  auto x = torch::tensor(ids, torch::kInt64).unsqueeze(0);  // (1,T')
  torch::NoGradGuard no_grad;
  return model.forward(x).select(1, x.size(1) - 1).squeeze(0).to(torch::kFloat64);  // (V)
}

}  // namespace

torch::Tensor next_token_probs(model::GptImpl& model, const std::vector<int32_t>& context) {
  if (context.empty()) throw ConfigError("[sample] context: expected at least one token, got none");
  model.eval();
  return torch::softmax(last_logits(model, context), 0);  // (V)
}

std::vector<TokenProb> top_k(const torch::Tensor& probs, int k, const tokenizer::Tokenizer& tok) {
  if (k < 1 || k > probs.size(0)) {
    throw ConfigError("[sample] top-k: expected 1.." + std::to_string(probs.size(0)) + ", got " + std::to_string(k));
  }
  auto [vals, idx] = probs.topk(k);
  std::vector<TokenProb> out;
  for (int i = 0; i < k; ++i) {
    TokenProb row;
    row.rank = i + 1;
    row.id = static_cast<int32_t>(idx[i].item<int64_t>());
    row.piece = tok.piece(row.id);
    row.prob = vals[i].item<double>();
    out.push_back(row);
  }
  return out;
}

std::vector<int32_t> generate(model::GptImpl& model, std::vector<int32_t> context, const GenerateOptions& opt) {
  if (opt.max_new_tokens < 0) throw ConfigError("[sample] generate: expected >= 0 tokens, got " + std::to_string(opt.max_new_tokens));
  if (!(opt.temperature >= 0.0)) throw ConfigError("[sample] temperature: expected >= 0, got " + std::to_string(opt.temperature));
  const int64_t V = model.config().vocab_size;
  if (opt.top_k < 0 || opt.top_k > V) {
    throw ConfigError("[sample] top-k: expected 0.." + std::to_string(V) + ", got " + std::to_string(opt.top_k));
  }
  if (context.empty()) throw ConfigError("[sample] context: expected at least one token, got none");
  model.eval();
  std::mt19937_64 rng(opt.seed);
  std::vector<int32_t> out;
  for (int64_t i = 0; i < opt.max_new_tokens; ++i) {
    auto logits = last_logits(model, context);  // (V) float64
    int32_t next;
    if (opt.temperature == 0.0) {
      next = static_cast<int32_t>(logits.argmax().item<int64_t>());
    } else {
      auto probs = torch::softmax(logits / opt.temperature, 0);  // (V)
      if (opt.top_k > 0) {
        auto kth = std::get<0>(probs.topk(opt.top_k)).min();
        probs = torch::where(probs >= kth, probs, torch::zeros_like(probs));
        probs = probs / probs.sum();
      }
      // Inverse-CDF draw with our own RNG: reproducible across LibTorch versions.
      auto p = probs.contiguous();
      const double* pp = p.data_ptr<double>();
      double total = 0.0;
      for (int64_t v = 0; v < V; ++v) total += pp[v];
      double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng) * total;
      next = static_cast<int32_t>(V - 1);
      for (int64_t v = 0; v < V; ++v) {
        u -= pp[v];
        if (u < 0.0 && pp[v] > 0.0) {
          next = static_cast<int32_t>(v);
          break;
        }
      }
    }
    out.push_back(next);
    context.push_back(next);
    if (next == opt.stop_id) break;
  }
  return out;
}

std::vector<int32_t> prompt_context(const tokenizer::Tokenizer& tok, const std::string& prompt) {
  std::vector<int32_t> ctx;
  if (tok.eos_id() >= 0) ctx.push_back(tok.eos_id());
  auto ids = tok.encode(prompt);
  ctx.insert(ctx.end(), ids.begin(), ids.end());
  if (ctx.empty()) throw ConfigError("[sample] prompt: expected text that encodes to at least one token");
  return ctx;
}

}  // namespace lm::sample
