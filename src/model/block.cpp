#include "model/block.h"

namespace lm::model {

BlockImpl::BlockImpl(int64_t C, int64_t H, int64_t mlp_hidden, MlpActivation act, OpsPtr ops) {
  ln1 = register_module("ln1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({C})));
  attn = register_module("attn", CausalSelfAttention(C, H, ops));
  ln2 = register_module("ln2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({C})));
  mlp = register_module("mlp", Mlp(C, mlp_hidden, act, ops));
}

torch::Tensor BlockImpl::forward(const torch::Tensor& x, KvLayer* cache) {
  auto h = x + attn->forward(ln1->forward(x), cache);  // (B,T,C)
  return h + mlp->forward(ln2->forward(h));     // (B,T,C)
}

}  // namespace lm::model
