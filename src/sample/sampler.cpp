#include "sample/sampler.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <queue>
#include <random>

#include "util/errors.h"
#include "util/text.h"

namespace lm::sample {
namespace {

torch::Tensor ids_tensor(const std::vector<int32_t>& ids) {
  return torch::tensor(std::vector<int64_t>(ids.begin(), ids.end()), torch::kInt64).unsqueeze(0);  // (1,T)
}

// Encodes `window` into an empty cache; returns the next-token logits (V) float64.
torch::Tensor prefill(model::GptImpl& model, const std::vector<int32_t>& window, model::KvCache& cache) {
  return model.forward_cached(ids_tensor(window), cache).squeeze(0).to(torch::kCPU, torch::kFloat64);
}

// Logits (V) float64 after the whole window, recomputed from scratch.
torch::Tensor full_logits(model::GptImpl& model, const std::vector<int32_t>& window) {
  auto h = model.forward_hidden(ids_tensor(window));  // (1,T,C)
  return model.logits_of(h.select(1, h.size(1) - 1)).squeeze(0).to(torch::kCPU, torch::kFloat64);
}

}  // namespace

void check_options(const model::GptImpl& model, const GenerateOptions& opt, int64_t n) {
  auto bad = [](const std::string& what) { throw ConfigError("[sample] " + what); };
  if (n < 1) bad("samples: expected >= 1, got " + std::to_string(n));
  if (opt.max_new_tokens < 0 || opt.max_new_tokens > kMaxNewTokens) {
    bad("generate: expected 0.." + std::to_string(kMaxNewTokens) + " tokens, got " + std::to_string(opt.max_new_tokens));
  }
  if (!(opt.temperature >= 0.0)) bad("temperature: expected >= 0, got " + util::as_written(opt.temperature));
  const int64_t V = model.config().vocab_size;
  if (opt.top_k < 0 || opt.top_k > V) bad("top-k: expected 0.." + std::to_string(V) + ", got " + std::to_string(opt.top_k));
  if (!(opt.top_p > 0.0 && opt.top_p <= 1.0)) bad("top-p: expected a value in (0, 1], got " + util::as_written(opt.top_p));
  if (opt.extend_positions && model.config().positions == model::Positions::kLearned) {
    bad("extend positions: expected a model with sinusoidal or rope positions; learned positions stop at max_seq_len=" +
        std::to_string(model.config().max_seq_len) + ". Hint: drop the flag; the window slides instead.");
  }
  if (opt.extend_positions && opt.max_new_tokens + model.config().max_seq_len > kMaxExtendedPositions) {
    bad("generate with extended positions: expected at most " + std::to_string(kMaxExtendedPositions) +
        " positions (every key and value is kept), got up to " +
        std::to_string(opt.max_new_tokens + model.config().max_seq_len) + ". Hint: drop --extend-positions to slide.");
  }
}

namespace {

// Draws one id from float64 logits (V), in plain C++: a handful of torch ops per token would cost more
// than the decoding step itself.
int32_t pick(const torch::Tensor& logits, const GenerateOptions& opt, std::mt19937_64& rng) {
  auto l = logits.contiguous();
  const double* lp = l.data_ptr<double>();
  const int64_t V = l.size(0);
  const int64_t top = std::max_element(lp, lp + V) - lp;
  if (opt.temperature == 0.0) return static_cast<int32_t>(top);
  // top-k on the logits (same order as the probabilities): keep the k largest and any tied with the k-th,
  // so only those need an exp
  double kth = -INFINITY;
  if (opt.top_k > 0 && opt.top_k < V) {  // the k-th largest logit: a min-heap of the k largest seen so far
    std::priority_queue<double, std::vector<double>, std::greater<double>> heap(lp, lp + opt.top_k);
    for (int64_t v = opt.top_k; v < V; ++v) {
      if (lp[v] > heap.top()) {
        heap.pop();
        heap.push(lp[v]);
      }
    }
    kth = heap.top();
  }
  std::vector<double> p(static_cast<size_t>(V), 0.0);
  for (int64_t v = 0; v < V; ++v) {
    if (lp[v] >= kth) p[v] = std::exp((lp[v] - lp[top]) / opt.temperature);  // softmax numerator
  }
  if (opt.top_p < 1.0) {
    // nucleus: the most likely tokens until their mass reaches top_p (the one crossing it included)
    std::vector<int32_t> order;
    double total = 0.0;
    for (int64_t v = 0; v < V; ++v) {
      if (p[v] > 0.0) order.push_back(static_cast<int32_t>(v));
      total += p[v];
    }
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return p[a] > p[b]; });
    double before = 0.0;
    for (int32_t v : order) {
      const double mass = p[v];
      if (before >= opt.top_p * total) p[v] = 0.0;
      before += mass;
    }
  }
  // Inverse-CDF draw with our own RNG: reproducible across LibTorch versions.
  double total = 0.0;
  for (double x : p) total += x;
  double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng) * total;
  int32_t last_nonzero = static_cast<int32_t>(top);
  for (int64_t v = 0; v < V; ++v) {
    if (p[v] <= 0.0) continue;
    last_nonzero = static_cast<int32_t>(v);
    u -= p[v];
    if (u < 0.0) return last_nonzero;
  }
  return last_nonzero;  // u landed on the rounding error at the very end
}

// One sample; `cache` holds the prompt already encoded (cached path) and `logits` its next-token logits.
Sample continue_sample(model::GptImpl& model, std::vector<int32_t> window, model::KvCache cache, torch::Tensor logits,
                       const GenerateOptions& opt, uint64_t seed) {
  const size_t T = static_cast<size_t>(model.config().max_seq_len);
  const size_t keep = std::max<size_t>(1, T / 2);
  std::mt19937_64 rng(seed);
  Sample s;
  for (int64_t i = 0; i < opt.max_new_tokens; ++i) {
    if (opt.on_logits) opt.on_logits(i, logits);
    const int32_t next = pick(logits, opt, rng);
    s.ids.push_back(next);
    if (next == opt.stop_id) {
      s.stop = StopReason::kEndOfText;
      break;
    }
    if (opt.stop_when && opt.stop_when(s.ids)) {
      s.stop = StopReason::kStopString;
      break;
    }
    if (i + 1 == opt.max_new_tokens) break;
    window.push_back(next);
    if (window.size() > T && !opt.extend_positions) {  // slide: keep the newest T/2, re-encode from position 0
      window.erase(window.begin(), window.end() - static_cast<std::ptrdiff_t>(keep));
      ++s.window_slides;
      if (opt.use_cache) {
        cache = model::KvCache{};
        logits = prefill(model, window, cache);
        continue;
      }
    }
    logits = opt.use_cache ? model.forward_cached(ids_tensor({next}), cache).squeeze(0).to(torch::kCPU, torch::kFloat64)
                           : full_logits(model, window);
  }
  return s;
}

}  // namespace

torch::Tensor next_token_probs(model::GptImpl& model, const std::vector<int32_t>& context) {
  if (context.empty()) throw ConfigError("[sample] context: expected at least one token, got none");
  model.eval();
  torch::NoGradGuard no_grad;
  int64_t dropped = 0;
  return torch::softmax(full_logits(model, fit_prompt(context, model.config().max_seq_len, false, dropped)), 0);  // (V)
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

std::vector<Sample> generate(model::GptImpl& model, const std::vector<int32_t>& context, const GenerateOptions& opt,
                             int64_t n) {
  check_options(model, opt, n);
  if (context.empty()) throw ConfigError("[sample] context: expected at least one token, got none");
  if (static_cast<int64_t>(context.size()) > model.config().max_seq_len) {
    throw ConfigError("[sample] context: expected at most max_seq_len=" + std::to_string(model.config().max_seq_len) +
                      " tokens, got " + std::to_string(context.size()) + ". Hint: fit_prompt keeps the last ones.");
  }
  model.eval();
  torch::NoGradGuard no_grad;
  model::KvCache prompt_cache;
  const torch::Tensor first = opt.use_cache ? prefill(model, context, prompt_cache) : full_logits(model, context);
  std::vector<Sample> out;
  for (int64_t i = 0; i < n; ++i) {
    out.push_back(continue_sample(model, context, i + 1 < n ? prompt_cache.clone() : std::move(prompt_cache), first,
                                  opt, opt.seed + static_cast<uint64_t>(i)));
  }
  return out;
}

std::vector<int32_t> fit_prompt(const std::vector<int32_t>& context, int64_t max_seq_len, bool no_truncate,
                                int64_t& dropped) {
  dropped = std::max<int64_t>(0, static_cast<int64_t>(context.size()) - max_seq_len);
  if (dropped > 0 && no_truncate) {
    throw ConfigError("[sample] prompt: expected at most max_seq_len=" + std::to_string(max_seq_len) +
                      " tokens (line start included), got " + std::to_string(context.size()) +
                      ". Hint: shorten it, or drop --no-truncate to keep its last " + std::to_string(max_seq_len) + ".");
  }
  return {context.begin() + dropped, context.end()};
}

std::string to_string(StopReason r) {
  switch (r) {
    case StopReason::kEndOfText: return "end of text";
    case StopReason::kStopString: return "stop string";
    case StopReason::kLength: break;
  }
  return "length";
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
