#include "model/attention.h"

#include <cmath>

#include "model/linear.h"

namespace lm::model {

CausalSelfAttentionImpl::CausalSelfAttentionImpl(int64_t C, int64_t H) : H_(H) {
  qkv = register_module("qkv", torch::nn::Linear(C, 3 * C));
  proj = register_module("proj", torch::nn::Linear(C, C));
}

void KvLayer::reserve(int64_t n, const torch::Tensor& like) {
  const int64_t cap = k_buf.defined() ? k_buf.size(2) : 0;
  if (n <= cap) return;
  auto sizes = like.sizes().vec();
  sizes[2] = std::max(n, 2 * cap);
  auto grow = [&](const torch::Tensor& old) {
    auto buf = torch::empty(sizes, like.options().memory_format(torch::MemoryFormat::Contiguous));
    if (len > 0) buf.narrow(2, 0, len).copy_(old.narrow(2, 0, len));
    return buf;
  };
  k_buf = grow(k_buf);
  v_buf = grow(v_buf);
}

void KvLayer::append(const torch::Tensor& k, const torch::Tensor& v) {
  const int64_t T = k.size(2);
  reserve(len + T, k);
  k_buf.narrow(2, len, T).copy_(k);
  v_buf.narrow(2, len, T).copy_(v);
  len += T;
}

torch::Tensor CausalSelfAttentionImpl::forward(const torch::Tensor& x, KvLayer* cache) {
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2), D = C / H_;
  auto parts = fast_linear(qkv, x).split(C, /*dim=*/2);                  // 3 x (B,T,C)
  auto q = parts[0].view({B, T, H_, D}).transpose(1, 2);             // (B,H,T,D)
  auto k = parts[1].view({B, T, H_, D}).transpose(1, 2);             // (B,H,T,D)
  auto v = parts[2].view({B, T, H_, D}).transpose(1, 2);             // (B,H,T,D)
  const int64_t S = cache ? cache->length() : 0;                     // positions already cached
  if (cache) {
    cache->append(k, v);
    k = cache->keys();    // (B,H,S+T,D)
    v = cache->values();  // (B,H,S+T,D)
  }
  auto att = torch::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(static_cast<double>(D)));  // (B,H,T,S+T)
  if (T > 1) {  // query i sits at position S+i and may see keys 0..S+i (a single new query sees them all)
    auto future = torch::ones({T, S + T}, torch::TensorOptions().dtype(torch::kBool).device(x.device())).triu(S + 1);
    att = att.masked_fill(future, -std::numeric_limits<float>::infinity());
  }
  att = torch::softmax(att, -1);                                     // (B,H,T,S+T)
  auto y = torch::matmul(att, v);                                    // (B,H,T,D)
  y = y.transpose(1, 2).contiguous().view({B, T, C});                // (B,T,C)
  return fast_linear(proj, y);                                            // (B,T,C)
}

}  // namespace lm::model
