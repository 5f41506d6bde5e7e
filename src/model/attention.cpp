#include "model/attention.h"

#include <torch/version.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "model/kernels.h"
#include "model/linear.h"

// at::scaled_dot_product_attention exists from LibTorch 2.0 on.
#if TORCH_VERSION_MAJOR >= 2
#define LMTRAIN_HAS_SDPA 1
#else
#define LMTRAIN_HAS_SDPA 0
#endif

namespace lm::model {

CausalSelfAttentionImpl::CausalSelfAttentionImpl(int64_t C, int64_t H) : H_(H) {
  qkv = register_module("qkv", torch::nn::Linear(C, 3 * C));
  proj = register_module("proj", torch::nn::Linear(C, C));
}

void KvLayer::reserve(int64_t n, const torch::Tensor& like) {
  const int64_t cap = k_buf_.defined() ? k_buf_.size(2) : 0;
  if (n <= cap) return;
  auto sizes = like.sizes().vec();
  sizes[2] = std::max(n, 2 * cap);
  auto grow = [&](const torch::Tensor& old) {
    auto buf = torch::empty(sizes, like.options().memory_format(torch::MemoryFormat::Contiguous));
    if (len_ > 0) buf.narrow(2, 0, len_).copy_(old.narrow(2, 0, len_));
    return buf;
  };
  k_buf_ = grow(k_buf_);
  v_buf_ = grow(v_buf_);
}

void KvLayer::append(const torch::Tensor& k, const torch::Tensor& v) {
  const int64_t T = k.size(2);
  reserve(len_ + T, k);
  k_buf_.narrow(2, len_, T).copy_(k);
  v_buf_.narrow(2, len_, T).copy_(v);
  len_ += T;
}

void KvLayer::append_one(const float* k, const float* v) {
  reserve(len_ + 1, k_buf_);
  const int64_t H = k_buf_.size(1), cap = k_buf_.size(2), D = k_buf_.size(3);
  float* kb = k_buf_.data_ptr<float>();
  float* vb = v_buf_.data_ptr<float>();
  for (int64_t h = 0; h < H; ++h) {
    std::memcpy(kb + (h * cap + len_) * D, k + h * D, static_cast<size_t>(D) * sizeof(float));
    std::memcpy(vb + (h * cap + len_) * D, v + h * D, static_cast<size_t>(D) * sizeof(float));
  }
  ++len_;
}

const float* KvLayer::key_rows(int64_t h) const { return k_buf_.data_ptr<float>() + h * k_buf_.size(2) * k_buf_.size(3); }

const float* KvLayer::value_rows(int64_t h) const {
  return v_buf_.data_ptr<float>() + h * v_buf_.size(2) * v_buf_.size(3);
}

KvLayer KvLayer::clone() const {
  KvLayer out;
  out.k_buf_ = k_buf_.defined() ? k_buf_.clone() : k_buf_;
  out.v_buf_ = v_buf_.defined() ? v_buf_.clone() : v_buf_;
  out.len_ = len_;
  return out;
}

torch::Tensor attention_reference(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                  c10::ScalarType dtype) {
  const int64_t T = q.size(2), S = k.size(2) - T, D = q.size(3);
  auto att = matmul_in(q, k.transpose(-2, -1), dtype) * (1.0 / std::sqrt(static_cast<double>(D)));  // (B,H,T,S+T)
  if (T > 1) {  // query i sits at position S+i and may see keys 0..S+i (a single new query sees them all)
    auto future = torch::ones({T, S + T}, torch::TensorOptions().dtype(torch::kBool).device(q.device())).triu(S + 1);
    att = att.masked_fill(future, -std::numeric_limits<float>::infinity());
  }
  att = torch::softmax(att, -1);                                     // (B,H,T,S+T)
  return matmul_in(att, v, dtype);                                   // (B,H,T,D)
}

torch::Tensor CausalSelfAttentionImpl::forward(const torch::Tensor& x, KvLayer* cache) {
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2), D = C / H_;
  auto fused_qkv = linear_in(qkv, x, compute_dtype);                 // (B,T,3C)
  if (!cache && T > 1 && compute_dtype == torch::kFloat && kernels::applies(fused_qkv)) {
    return linear_in(proj, kernels::causal_attention(fused_qkv, H_), compute_dtype);  // (B,T,C)
  }
  auto parts = fused_qkv.split(C, /*dim=*/2);                        // 3 x (B,T,C)
  auto q = parts[0].view({B, T, H_, D}).transpose(1, 2);             // (B,H,T,D)
  auto k = parts[1].view({B, T, H_, D}).transpose(1, 2);             // (B,H,T,D)
  auto v = parts[2].view({B, T, H_, D}).transpose(1, 2);             // (B,H,T,D)
  [[maybe_unused]] const int64_t S = cache ? cache->length() : 0;    // positions already cached
  if (cache) {
    cache->append(k, v);
    k = cache->keys();    // (B,H,S+T,D)
    v = cache->values();  // (B,H,S+T,D)
  }
  torch::Tensor y;
#if LMTRAIN_HAS_SDPA
  // Fused (flash / memory-efficient) attention. Its causal mask is aligned to the first key, so it serves a
  // whole window (S = 0) or a single new token (T = 1, which sees every key); a window after cached
  // positions takes the reference path.
  if (S == 0 || T == 1) {
    y = at::scaled_dot_product_attention(q.to(compute_dtype), k.to(compute_dtype), v.to(compute_dtype), {}, 0.0,
                                         /*is_causal=*/T > 1)
            .to(torch::kFloat);  // (B,H,T,D)
  }
#endif
  if (!y.defined()) y = attention_reference(q, k, v, compute_dtype);  // (B,H,T,D)
  y = y.transpose(1, 2).contiguous().view({B, T, C});                // (B,T,C)
  return linear_in(proj, y, compute_dtype);                          // (B,T,C)
}

}  // namespace lm::model
