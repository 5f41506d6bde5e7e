// Causal multi-head self-attention with a fused qkv projection (Vaswani et al. 2017; GPT-2 layout), q and
// k optionally normalised per head (qk_norm) and rotated by their positions (rope) before the scores.
#pragma once

#include <torch/torch.h>

#include "model/ops.h"
#include "model/positions.h"

namespace lm::model {

/// Keys and values of the positions one layer has already seen (incremental decoding). Buffers are
/// (B,H,capacity,D) and grow by doubling, so a new token costs no copy of the earlier ones.
class KvLayer {
 public:
  int64_t length() const { return len_; }
  /// Appends k, v (B,H,T,D).
  void append(const torch::Tensor& k, const torch::Tensor& v);
  torch::Tensor keys() const { return k_buf_.narrow(2, 0, len_); }    // (B,H,len,D)
  torch::Tensor values() const { return v_buf_.narrow(2, 0, len_); }  // (B,H,len,D)
  /// Independent copy.
  KvLayer clone() const;

 private:
  /// Makes room for `n` positions in total, keeping the cached ones. `like` (B,H,*,D) gives the shape.
  void reserve(int64_t n, const torch::Tensor& like);
  torch::Tensor k_buf_, v_buf_;  // (B,H,capacity,D)
  int64_t len_ = 0;
};

class CausalSelfAttentionImpl : public torch::nn::Module {
 public:
  /// C = cfg.d_model, H = cfg.n_heads (C % H == 0), biases when cfg.bias, q and k normalised when
  /// cfg.qk_norm; `rope` (the model's, for rope positions) rotates them, else null. `ops` computes the
  /// products, the q/k preparation and the attention (model/ops.h).
  CausalSelfAttentionImpl(const GptConfig& cfg, OpsPtr ops, std::shared_ptr<RotaryImpl> rope);
  /// x: (B,T,C) -> (B,T,C); position t attends to positions <= t only. With a cache holding S earlier
  /// positions, x holds positions S..S+T-1: their keys (rotated, for rope) and values are appended to the
  /// cache here, and then they attend to every cached key (the operations only read the cache).
  torch::Tensor forward(const torch::Tensor& x, KvLayer* cache = nullptr);

  torch::nn::Linear qkv{nullptr};   // C -> 3C  (checkpoint: attn.qkv.weight / .bias)
  torch::nn::Linear proj{nullptr};  // C -> C   (residual projection; GPT-2 scaled init)

 private:
  int64_t H_;
  bool qk_norm_;
  std::shared_ptr<RotaryImpl> rope_;  // shared with the model (registered there as "rope")
  OpsPtr ops_;
};
TORCH_MODULE(CausalSelfAttention);

}  // namespace lm::model
