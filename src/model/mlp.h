// Position-wise feed-forward network: Linear(C, rC) -> GELU -> Linear(rC, C).
#pragma once

#include <torch/torch.h>

namespace lm::model {

class MlpImpl : public torch::nn::Module {
 public:
  MlpImpl(int64_t C, int64_t hidden);
  /// x: (B,T,C) -> (B,T,C).
  torch::Tensor forward(const torch::Tensor& x);

  torch::nn::Linear fc{nullptr};    // C -> hidden   (checkpoint: mlp.fc.*)
  torch::nn::Linear proj{nullptr};  // hidden -> C   (residual projection; GPT-2 scaled init)
  c10::ScalarType compute_dtype = torch::kFloat;  ///< dtype of the products (set by GptImpl::set_compute_dtype)
};
TORCH_MODULE(Mlp);

}  // namespace lm::model
