#include "model/mlp.h"

namespace lm::model {

MlpImpl::MlpImpl(int64_t C, int64_t hidden, MlpActivation act, OpsPtr ops) : act_(act), ops_(std::move(ops)) {
  fc = register_module("fc", torch::nn::Linear(C, hidden));
  proj = register_module("proj", torch::nn::Linear(hidden, C));
}

torch::Tensor MlpImpl::forward(const torch::Tensor& x) {
  auto h = ops_->linear_act(x, fc->weight, fc->bias, act_);  // (B,T,C) -> (B,T,hidden)
  return ops_->linear(h, proj->weight, proj->bias);     // (B,T,C)
}

}  // namespace lm::model
