// Position-wise feed-forward network: Linear(C, rC) -> GELU (or relu^2) -> Linear(rC, C), biases optional.
#pragma once

#include <torch/torch.h>

#include "model/ops.h"

namespace lm::model {

class MlpImpl : public torch::nn::Module {
 public:
  /// C = cfg.d_model, hidden = cfg.mlp_ratio * C, with biases when cfg.bias; `ops` computes the products
  /// and the activation (model/ops.h).
  MlpImpl(const GptConfig& cfg, OpsPtr ops);
  /// x: (B,T,C) -> (B,T,C).
  torch::Tensor forward(const torch::Tensor& x);

  torch::nn::Linear fc{nullptr};    // C -> hidden   (checkpoint: mlp.fc.*)
  torch::nn::Linear proj{nullptr};  // hidden -> C   (residual projection; GPT-2 scaled init)

 private:
  MlpActivation act_;
  OpsPtr ops_;
};
TORCH_MODULE(Mlp);

}  // namespace lm::model
