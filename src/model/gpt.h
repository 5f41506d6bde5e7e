// The decoder-only model: token table -> (x scale) -> + positions (learned, sinusoidal; none for rope) ->
// blocks -> ln_f -> logits through the token table (tied) or a separate head (untied), optionally soft-capped. Parameter names are checkpoint keys (docs/formats.md "Weight names (`model.safetensors`)").
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "model/block.h"
#include "model/gpt_config.h"
#include "model/ops.h"
#include "model/positions.h"

namespace lm::model {

/// Called by forward and forward_hidden at each stage with its name and tensor (for `inspect shapes`).
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
  /// Builds and initialises (GPT-2 scheme, init_weights) a model that computes with `ops` (model/ops.h: the reference
  /// set in fp32 unless given; the trainer's come from make_ops). Uses the global torch RNG: seed it first.
  /// Throws ConfigError when cfg.problems() is not empty.
  explicit GptImpl(const GptConfig& cfg, OpsPtr ops = reference_ops());

  /// idx: (B,T) int64 token ids, T <= max_seq_len for learned positions -> logits (B,T,V). With targets
  /// (B,T): the mean next-token loss () instead, the same value as cross-entropy of those logits but computed
  /// by ops()->next_token_loss without materialising the (B,T,V) logits at once. `on_stage`, when given, sees
  /// every stage's tensor on the way (`inspect shapes`, `inspect probs`); "logits" only without targets.
  torch::Tensor forward(const torch::Tensor& idx, const torch::Tensor& targets = {}, const StageFn& on_stage = nullptr);
  /// The trunk alone: idx (B,T) -> the final hidden states after ln_f (B,T,C), every stage traced as in
  /// forward(). forward() = linear(hidden, output_weight()). For whoever wants the states, not the logits
  /// (the sampler's last row, inspect).
  torch::Tensor forward_hidden(const torch::Tensor& idx, const StageFn& on_stage = nullptr);
  /// Incremental decoding: idx (B,T) are the tokens at positions cache.length().. ; their keys and values
  /// are appended to `cache`. Returns the logits of the last of them: (B,V). The caller keeps
  /// cache.length() + T <= max_seq_len for learned positions (sinusoidal ones exist for any position).
  /// The same block code as forward(), with the cache: one new token is a (B,1) idx.
  torch::Tensor forward_cached(const torch::Tensor& idx, KvCache& cache);

  /// The head: hidden states (..., C) -> logits (..., V), soft-capped when cfg.logit_softcap > 0.
  torch::Tensor logits_of(const torch::Tensor& hidden) const;
  /// The output projection (V,C): tok_emb.weight when tied, head.weight otherwise.
  torch::Tensor output_weight() const;
  /// The operations the model computes with (model/ops.h; ops()->dtype() is the products' dtype).
  const OpsPtr& ops() const { return ops_; }
  /// Where the weights are; inputs given on another device are moved here.
  torch::Device device() const { return tok_emb->weight.device(); }
  const GptConfig& config() const { return cfg_; }

  torch::nn::Embedding tok_emb{nullptr};              // (V,C) "tok_emb.weight"
  std::shared_ptr<PositionEncodingImpl> pos_emb;      // "pos_emb.weight" when learned; null for rope
  std::shared_ptr<RotaryImpl> rope;                   // rope positions' tables (buffers, not saved), else null
  torch::nn::ModuleList blocks{nullptr};              // "blocks.<i>.*"
  torch::nn::LayerNorm ln_f{nullptr};                 // "ln_f.weight" / "ln_f.bias"
  torch::nn::Linear head{nullptr};                    // "head.weight", only when untied

 private:
  void init_weights();
  torch::Tensor hidden(const torch::Tensor& idx, KvCache* cache, const StageFn& on_stage);
  GptConfig cfg_;
  OpsPtr ops_;
};
TORCH_MODULE(Gpt);

/// Registered parameters by checkpoint name, in registration order (the tied head appears once).
std::vector<std::pair<std::string, torch::Tensor>> named_weights(const torch::nn::Module& m);

}  // namespace lm::model
