#include "model/attention.h"

#include <algorithm>
#include <tuple>

namespace lm::model {

CausalSelfAttentionImpl::CausalSelfAttentionImpl(const GptConfig& cfg, OpsPtr ops, std::shared_ptr<RotaryImpl> rope)
    : H_(cfg.n_heads), qk_norm_(cfg.qk_norm), rope_(std::move(rope)), ops_(std::move(ops)) {
  const int64_t C = cfg.d_model;
  qkv = register_module("qkv", torch::nn::Linear(torch::nn::LinearOptions(C, 3 * C).bias(cfg.bias)));
  proj = register_module("proj", torch::nn::Linear(torch::nn::LinearOptions(C, C).bias(cfg.bias)));
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

KvLayer KvLayer::clone() const {
  KvLayer out;
  out.k_buf_ = k_buf_.defined() ? k_buf_.clone() : k_buf_;
  out.v_buf_ = v_buf_.defined() ? v_buf_.clone() : v_buf_;
  out.len_ = len_;
  return out;
}

torch::Tensor CausalSelfAttentionImpl::forward(const torch::Tensor& x, KvLayer* cache) {
  auto qkv_x = ops_->linear(x, qkv->weight, qkv->bias);              // (B,T,3C): q | k | v
  if (qk_norm_ || rope_) {
    torch::Tensor cos, sin;  // (T,D/2) of positions S..S+T-1, S = the cached positions
    if (rope_) std::tie(cos, sin) = rope_->tables(x.size(1), cache ? cache->length() : 0);
    qkv_x = ops_->prepare_qk(qkv_x, H_, qk_norm_, cos, sin);         // (B,T,3C)
  }
  if (cache) {  // this window's keys and values join the cache; the attention then reads them there
    const int64_t B = x.size(0), T = x.size(1), C = x.size(2), D = C / H_;
    auto parts = qkv_x.split(C, /*dim=*/2);                          // 3 x (B,T,C)
    cache->append(parts[1].view({B, T, H_, D}).transpose(1, 2), parts[2].view({B, T, H_, D}).transpose(1, 2));
  }
  auto y = ops_->attention(qkv_x, H_, cache);                        // (B,T,C)
  return ops_->linear(y, proj->weight, proj->bias);                  // (B,T,C)
}

}  // namespace lm::model
