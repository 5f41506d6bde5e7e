#include "model/mlp.h"

#include "model/linear.h"

namespace lm::model {

MlpImpl::MlpImpl(int64_t C, int64_t hidden) {
  fc = register_module("fc", torch::nn::Linear(C, hidden));
  proj = register_module("proj", torch::nn::Linear(hidden, C));
}

torch::Tensor MlpImpl::forward(const torch::Tensor& x) {
  // The fused CPU kernels apply the GELU inside the fc product's threads (kernels::linear_gelu); a single
  // row (decoding) stays on fast_linear's matrix-vector product.
  if (compute_dtype == torch::kFloat && kernels::applies(x) && !single_row(x)) {
    return linear_in(proj, kernels::linear_gelu(x, fc->weight, fc->bias), compute_dtype);
  }
  return linear_in(proj, torch::gelu(linear_in(fc, x, compute_dtype)), compute_dtype);  // (B,T,C) -> (B,T,hidden) -> (B,T,C)
}

}  // namespace lm::model
