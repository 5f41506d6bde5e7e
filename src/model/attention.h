// Causal multi-head self-attention with a fused qkv projection (Vaswani et al. 2017; GPT-2 layout).
#pragma once

#include <torch/torch.h>

namespace lm::model {

class CausalSelfAttentionImpl : public torch::nn::Module {
 public:
  /// REQUIRES: C % H == 0.
  CausalSelfAttentionImpl(int64_t C, int64_t H);
  /// x: (B,T,C) -> (B,T,C); position t attends to positions <= t only.
  torch::Tensor forward(const torch::Tensor& x);

  torch::nn::Linear qkv{nullptr};   // C -> 3C  (checkpoint: attn.qkv.weight / .bias)
  torch::nn::Linear proj{nullptr};  // C -> C   (residual projection; GPT-2 scaled init)

 private:
  int64_t H_;
};
TORCH_MODULE(CausalSelfAttention);

}  // namespace lm::model
