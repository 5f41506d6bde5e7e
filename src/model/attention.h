// Causal multi-head self-attention with a fused qkv projection (Vaswani et al. 2017; GPT-2 layout).
#pragma once

#include <torch/torch.h>

namespace lm::model {

/// Keys and values of the positions one layer has already seen (incremental decoding). Buffers are
/// (B,H,capacity,D) and grow by doubling, so a new token costs no copy of the earlier ones.
struct KvLayer {
  torch::Tensor k_buf, v_buf;
  int64_t len = 0;
  int64_t length() const { return len; }
  /// Appends k, v (B,H,T,D).
  void append(const torch::Tensor& k, const torch::Tensor& v);
  /// Makes room for `n` positions in total, keeping the cached ones. `like` (B,H,*,D) gives the shape.
  void reserve(int64_t n, const torch::Tensor& like);
  torch::Tensor keys() const { return k_buf.narrow(2, 0, len); }    // (B,H,len,D)
  torch::Tensor values() const { return v_buf.narrow(2, 0, len); }  // (B,H,len,D)
};

class CausalSelfAttentionImpl : public torch::nn::Module {
 public:
  /// REQUIRES: C % H == 0.
  CausalSelfAttentionImpl(int64_t C, int64_t H);
  /// x: (B,T,C) -> (B,T,C); position t attends to positions <= t only. With a cache holding S earlier
  /// positions, x holds positions S..S+T-1: they attend to the cached keys too, and their keys and values
  /// are appended to the cache.
  torch::Tensor forward(const torch::Tensor& x, KvLayer* cache = nullptr);

  torch::nn::Linear qkv{nullptr};   // C -> 3C  (checkpoint: attn.qkv.weight / .bias)
  torch::nn::Linear proj{nullptr};  // C -> C   (residual projection; GPT-2 scaled init)

 private:
  int64_t H_;
};
TORCH_MODULE(CausalSelfAttention);

}  // namespace lm::model
