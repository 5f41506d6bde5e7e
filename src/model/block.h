// Pre-LN transformer block: x + attn(ln1(x)), then + mlp(ln2(x)) (Xiong et al. 2020, GPT-2 layout).
#pragma once

#include <torch/torch.h>

#include "model/attention.h"
#include "model/mlp.h"

namespace lm::model {

class BlockImpl : public torch::nn::Module {
 public:
  /// `rope`: the model's rotary tables when cfg.positions is rope, else null.
  BlockImpl(const GptConfig& cfg, OpsPtr ops, std::shared_ptr<RotaryImpl> rope);
  /// x: (B,T,C) -> (B,T,C). `cache`: this layer's keys/values for incremental decoding (see attention.h).
  torch::Tensor forward(const torch::Tensor& x, KvLayer* cache = nullptr);

  torch::nn::LayerNorm ln1{nullptr};
  CausalSelfAttention attn{nullptr};
  torch::nn::LayerNorm ln2{nullptr};
  Mlp mlp{nullptr};
};
TORCH_MODULE(Block);

}  // namespace lm::model
