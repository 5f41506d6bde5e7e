// y = x W^T + b that stays fast for a single row (incremental decoding).
#pragma once

#include <torch/torch.h>

namespace lm::model {

/// Same value as torch::nn::functional::linear(x, weight, bias) for x (..., in). A single row goes
/// through a matrix-vector product: OpenBLAS sgemm repacks the whole weight matrix on every call, which
/// for one row costs more than the arithmetic (measured: the 8192x128 logits product went 4x faster).
inline torch::Tensor fast_linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias = {}) {
  if (x.numel() != x.size(-1)) return torch::nn::functional::linear(x, weight, bias);
  auto sizes = x.sizes().vec();
  sizes.back() = weight.size(0);
  auto v = x.reshape({-1});
  auto y = bias.defined() ? torch::addmv(bias, weight, v) : torch::mv(weight, v);  // (out)
  return y.view(sizes);
}

/// The layer's product through fast_linear() above.
inline torch::Tensor fast_linear(const torch::nn::Linear& layer, const torch::Tensor& x) {
  return fast_linear(x, layer->weight, layer->bias);
}

}  // namespace lm::model
