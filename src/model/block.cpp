#include "model/block.h"

namespace lm::model {

BlockImpl::BlockImpl(const GptConfig& cfg, OpsPtr ops, std::shared_ptr<RotaryImpl> rope) {
  const int64_t C = cfg.d_model;
  ln1 = register_module("ln1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({C})));
  attn = register_module("attn", CausalSelfAttention(cfg, ops, std::move(rope)));
  ln2 = register_module("ln2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({C})));
  mlp = register_module("mlp", Mlp(cfg, ops));
}

torch::Tensor BlockImpl::forward(const torch::Tensor& x, KvLayer* cache) {
  auto h = x + attn->forward(ln1->forward(x), cache);  // (B,T,C)
  return h + mlp->forward(ln2->forward(h));     // (B,T,C)
}

}  // namespace lm::model
