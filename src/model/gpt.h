// The decoder-only model: token table -> (x scale) -> + positions -> blocks -> ln_f -> logits through the
// token table (tied) or a separate head (untied). Parameter names are checkpoint keys (docs/formats.md "Weight names (`model.safetensors`)").
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "model/block.h"
#include "model/gpt_config.h"
#include "model/positions.h"

namespace lm::model {

/// Called by forward_traced at each stage with its name and tensor (for `inspect shapes`).
using StageFn = std::function<void(const std::string& stage, const torch::Tensor& t)>;

/// Keys and values of every layer for incremental decoding. `length` positions are cached; the next
/// tokens fed to forward_cached sit at positions length, length+1, ...
struct KvCache {
  std::vector<KvLayer> layers;
  int64_t length() const { return layers.empty() ? 0 : layers.front().length(); }
  /// Independent copy (several samples continue one prompt).
  KvCache clone() const;
};

class GptImpl : public torch::nn::Module {
 public:
  /// Builds and initialises (GPT-2 scheme) a model. Uses the global torch RNG: seed it first.
  /// Throws ConfigError when cfg.problems() is not empty.
  explicit GptImpl(const GptConfig& cfg);

  /// idx: (B,T) int64 token ids, T <= max_seq_len for learned positions -> logits (B,T,V).
  torch::Tensor forward(const torch::Tensor& idx);
  /// forward with a callback at every stage.
  torch::Tensor forward_traced(const torch::Tensor& idx, const StageFn& on_stage);
  /// Final hidden states after ln_f: idx (B,T) -> (B,T,C). forward() = linear(hidden, output_weight()).
  torch::Tensor forward_hidden(const torch::Tensor& idx, const StageFn& on_stage = nullptr);
  /// Incremental decoding: idx (B,T) are the tokens at positions cache.length().. ; their keys and values
  /// are appended to `cache`. Returns the logits of the last of them: (B,V). The caller keeps
  /// cache.length() + T <= max_seq_len for learned positions (sinusoidal ones exist for any position).
  torch::Tensor forward_cached(const torch::Tensor& idx, KvCache& cache);
  /// forward_cached for one sequence (B=1) and one token, with the small vector work done in plain loops
  /// instead of ~30 tensor ops per layer (decode.cpp). REQUIRES: the cache holds the prompt (prefilled
  /// with forward_cached). Returns the logits (V).
  /// MUST MIRROR BlockImpl::forward, CausalSelfAttentionImpl::forward and MlpImpl::forward: it re-implements
  /// their LayerNorm, attention and GELU by hand, so a change there (an activation, a norm, a bias, a
  /// scale) must be made here too. The test Sample.CachedLogitsEqualFullRecomputeForEveryStep
  /// (sample_test.cpp) compares it with the full forward to 1e-5 at every step and fails when they drift.
  torch::Tensor decode_one(int64_t token, KvCache& cache);
  /// Mean next-token loss of idx (B,T) against targets (B,T), same value as
  /// next_token_loss(forward(idx), targets) but without materialising the (B,T,V) logits at once.
  torch::Tensor loss(const torch::Tensor& idx, const torch::Tensor& targets);

  /// The output projection (V,C): tok_emb.weight when tied, head.weight otherwise.
  torch::Tensor output_weight() const;
  /// Runs every matrix product in `dtype` (kFloat, default; or kBFloat16: bf16 products on the fp32
  /// weights, with LayerNorm, softmax and the loss in fp32). Not part of the architecture: not saved.
  void set_compute_dtype(c10::ScalarType dtype);
  c10::ScalarType compute_dtype() const { return compute_dtype_; }
  /// Where the weights are; inputs given on another device are moved here.
  torch::Device device() const { return tok_emb->weight.device(); }
  const GptConfig& config() const { return cfg_; }

  torch::nn::Embedding tok_emb{nullptr};              // (V,C) "tok_emb.weight"
  std::shared_ptr<PositionEncodingImpl> pos_emb;      // "pos_emb.weight" when learned
  torch::nn::ModuleList blocks{nullptr};              // "blocks.<i>.*"
  torch::nn::LayerNorm ln_f{nullptr};                 // "ln_f.weight" / "ln_f.bias"
  torch::nn::Linear head{nullptr};                    // "head.weight", only when untied

 private:
  void init_weights();
  torch::Tensor hidden(const torch::Tensor& idx, KvCache* cache, const StageFn& on_stage);
  GptConfig cfg_;
  c10::ScalarType compute_dtype_ = torch::kFloat;
};
TORCH_MODULE(Gpt);

/// Mean next-token cross-entropy in nats. logits (B,T,V), targets (B,T) -> scalar.
torch::Tensor next_token_loss(const torch::Tensor& logits, const torch::Tensor& targets);

/// Mean cross-entropy of linear(hidden, weight) against targets, computed in row chunks of at most
/// `chunk_rows` so no (B*T, V) logits tensor is ever allocated whole. hidden (B,T,C) or (N,C), weight (V,C).
/// The product runs in `dtype` (linear.h linear_in); the logits and the cross-entropy are fp32.
/// Why: tensors above glibc's 32 MiB mmap limit are mapped fresh on every allocation, and the page faults
/// cost more than the arithmetic (measured: a 67 MB add takes 80 ms fresh vs 13 ms into reused memory).
torch::Tensor chunked_next_token_loss(const torch::Tensor& hidden, const torch::Tensor& weight,
                                      const torch::Tensor& targets, int64_t chunk_rows = 256,
                                      c10::ScalarType dtype = torch::kFloat);

/// Registered parameters by checkpoint name, in registration order (the tied head appears once).
std::vector<std::pair<std::string, torch::Tensor>> named_weights(const torch::nn::Module& m);

}  // namespace lm::model
