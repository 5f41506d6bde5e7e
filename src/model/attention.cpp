#include "model/attention.h"

#include <cmath>

namespace lm::model {

CausalSelfAttentionImpl::CausalSelfAttentionImpl(int64_t C, int64_t H) : H_(H) {
  qkv = register_module("qkv", torch::nn::Linear(C, 3 * C));
  proj = register_module("proj", torch::nn::Linear(C, C));
}

torch::Tensor CausalSelfAttentionImpl::forward(const torch::Tensor& x) {
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2), D = C / H_;
  auto parts = qkv->forward(x).split(C, /*dim=*/2);                  // 3 x (B,T,C)
  auto q = parts[0].view({B, T, H_, D}).transpose(1, 2);             // (B,H,T,D)
  auto k = parts[1].view({B, T, H_, D}).transpose(1, 2);             // (B,H,T,D)
  auto v = parts[2].view({B, T, H_, D}).transpose(1, 2);             // (B,H,T,D)
  auto att = torch::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(static_cast<double>(D)));  // (B,H,T,T)
  auto future = torch::ones({T, T}, torch::TensorOptions().dtype(torch::kBool).device(x.device())).triu(1);
  att = torch::softmax(att.masked_fill(future, -std::numeric_limits<float>::infinity()), -1);     // (B,H,T,T)
  auto y = torch::matmul(att, v);                                    // (B,H,T,D)
  y = y.transpose(1, 2).contiguous().view({B, T, C});                // (B,T,C)
  return proj->forward(y);                                           // (B,T,C)
}

}  // namespace lm::model
