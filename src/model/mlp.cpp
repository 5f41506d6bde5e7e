#include "model/mlp.h"

namespace lm::model {

MlpImpl::MlpImpl(const GptConfig& cfg, OpsPtr ops) : act_(cfg.mlp_activation), ops_(std::move(ops)) {
  const int64_t C = cfg.d_model, hidden = cfg.mlp_ratio * C;
  fc = register_module("fc", torch::nn::Linear(torch::nn::LinearOptions(C, hidden).bias(cfg.bias)));
  proj = register_module("proj", torch::nn::Linear(torch::nn::LinearOptions(hidden, C).bias(cfg.bias)));
}

torch::Tensor MlpImpl::forward(const torch::Tensor& x) {
  auto h = ops_->linear_act(x, fc->weight, fc->bias, act_);  // (B,T,C) -> (B,T,hidden)
  return ops_->linear(h, proj->weight, proj->bias);     // (B,T,C)
}

}  // namespace lm::model
