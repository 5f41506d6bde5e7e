// y = x W^T + b that stays fast for a single row (incremental decoding), and the products of the bf16
// precision (run.precision): bf16 arithmetic on fp32 master weights.
#pragma once

#include <torch/torch.h>

#include "model/kernels.h"

namespace lm::model {

/// True when x (..., in) holds one row: decoding's case, which fast_linear serves by a matrix-vector product.
inline bool single_row(const torch::Tensor& x) { return x.numel() == x.size(-1); }

/// Same value as torch::nn::functional::linear(x, weight, bias) for x (..., in). A single row goes
/// through a matrix-vector product: OpenBLAS sgemm repacks the whole weight matrix on every call, which
/// for one row costs more than the arithmetic (measured: the 8192x128 logits product went 4x faster).
inline torch::Tensor fast_linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias = {}) {
  if (!single_row(x)) {
    return kernels::applies(x) ? kernels::linear(x, weight, bias) : torch::nn::functional::linear(x, weight, bias);
  }
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

/// x W^T + b with the product in `dtype`. kFloat: fast_linear. kBFloat16: input, weight and bias cast to
/// bf16, the result cast back to float32, so the fp32 master weights get fp32 gradients through the casts
/// and whatever follows (LayerNorm, softmax, the loss) runs in fp32.
inline torch::Tensor linear_in(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                               c10::ScalarType dtype) {
  if (dtype == torch::kFloat) return fast_linear(x, weight, bias);
  return torch::nn::functional::linear(x.to(dtype), weight.to(dtype), bias.defined() ? bias.to(dtype) : bias)
      .to(torch::kFloat);
}

inline torch::Tensor linear_in(const torch::nn::Linear& layer, const torch::Tensor& x, c10::ScalarType dtype) {
  return linear_in(x, layer->weight, layer->bias, dtype);
}

/// a @ b with the product in `dtype` (as linear_in): attention scores and the weighted sum of values.
inline torch::Tensor matmul_in(const torch::Tensor& a, const torch::Tensor& b, c10::ScalarType dtype) {
  if (dtype == torch::kFloat) return torch::matmul(a, b);
  return torch::matmul(a.to(dtype), b.to(dtype)).to(torch::kFloat);
}

}  // namespace lm::model
