#include "model/ops.h"

#include <torch/version.h>

#include <cmath>
#include <limits>

#include "model/attention.h"
#include "model/positions.h"

// at::scaled_dot_product_attention exists from LibTorch 2.0 on.
#if TORCH_VERSION_MAJOR >= 2
#define LMTRAIN_HAS_SDPA 1
#else
#define LMTRAIN_HAS_SDPA 0
#endif

namespace lm::model {

namespace {

// x (..., in) W^T + b in fp32. A single row (decoding) goes through a matrix-vector product: OpenBLAS sgemm
// repacks the whole weight matrix on every call, which for one row costs more than the arithmetic
// (measured: the 8192x128 logits product went 4x faster).
torch::Tensor linear_fp32(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) {
  if (x.numel() != x.size(-1)) return torch::nn::functional::linear(x, w, b);
  auto sizes = x.sizes().vec();
  sizes.back() = w.size(0);
  auto v = x.reshape({-1});
  return (b.defined() ? torch::addmv(b, w, v) : torch::mv(w, v)).view(sizes);  // (out)
}

// a @ b with the product in `dtype` (as linear): attention scores and the weighted sum of values.
torch::Tensor matmul_in(const torch::Tensor& a, const torch::Tensor& b, c10::ScalarType dtype) {
  if (dtype == torch::kFloat) return torch::matmul(a, b);
  return torch::matmul(a.to(dtype), b.to(dtype)).to(torch::kFloat);
}

}  // namespace

torch::Tensor ReferenceOps::linear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) const {
  if (dtype_ == torch::kFloat) return linear_fp32(x, w, b);
  // bf16: input, weight and bias cast, the result cast back, so the fp32 master weights get fp32 gradients
  // through the casts and whatever follows (LayerNorm, softmax, the loss) runs in fp32.
  const torch::Tensor wd = copies_ && dtype_ == torch::kBFloat16 ? copies_->of(w) : w.to(dtype_);
  return torch::nn::functional::linear(x.to(dtype_), wd, b.defined() ? b.to(dtype_) : b).to(torch::kFloat);
}

torch::Tensor ReferenceOps::linear_act(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
                                       MlpActivation act) const {
  auto h = linear(x, w, b);  // (..., out)
  return act == MlpActivation::kGelu ? torch::gelu(h) : torch::relu(h).square();
}

torch::Tensor Ops::prepare_qk(const torch::Tensor& qkv, int64_t heads, bool qk_norm, const torch::Tensor& cos,
                              const torch::Tensor& sin) const {
  const int64_t B = qkv.size(0), T = qkv.size(1), C = qkv.size(2) / 3, H = heads, D = C / H;
  auto parts = qkv.view({B, T, 3, H, D}).unbind(2);                  // 3 x (B,T,H,D)
  auto prepare = [&](torch::Tensor x) {
    if (qk_norm) x = x * torch::rsqrt(x.square().mean(-1, /*keepdim=*/true) + 1e-6);
    if (cos.defined()) x = rotate_half(x, cos.unsqueeze(1), sin.unsqueeze(1));  // tables (T,1,D/2) over heads
    return x;
  };
  return torch::stack({prepare(parts[0]), prepare(parts[1]), parts[2]}, 2).view({B, T, 3 * C});  // (B,T,3C)
}

torch::Tensor ReferenceOps::attention(const torch::Tensor& qkv, int64_t heads, const KvLayer* cache) const {
  const int64_t B = qkv.size(0), T = qkv.size(1), C = qkv.size(2) / 3, H = heads, D = C / H;
  auto parts = qkv.split(C, /*dim=*/2);                              // 3 x (B,T,C)
  auto q = parts[0].view({B, T, H, D}).transpose(1, 2);              // (B,H,T,D)
  auto k = parts[1].view({B, T, H, D}).transpose(1, 2);              // (B,H,T,D)
  auto v = parts[2].view({B, T, H, D}).transpose(1, 2);              // (B,H,T,D)
  [[maybe_unused]] const int64_t S = cache ? cache->length() - T : 0;  // positions cached before these
  if (cache) {
    k = cache->keys();    // (B,H,S+T,D): these positions' keys appended by the layer
    v = cache->values();  // (B,H,S+T,D)
  }
  torch::Tensor y;
#if LMTRAIN_HAS_SDPA
  // Fused (flash / memory-efficient) attention. Its causal mask is aligned to the first key, so it serves a
  // whole window (S = 0) or a single new token (T = 1, which sees every key); a window after cached
  // positions takes the op-by-op path.
  if (S == 0 || T == 1) {
    y = at::scaled_dot_product_attention(q.to(dtype_), k.to(dtype_), v.to(dtype_), {}, 0.0, /*is_causal=*/T > 1)
            .to(torch::kFloat);  // (B,H,T,D)
  }
#endif
  if (!y.defined()) y = attention_reference(q, k, v, dtype_);        // (B,H,T,D)
  return y.transpose(1, 2).contiguous().view({B, T, C});             // (B,T,C)
}

torch::Tensor ReferenceOps::embedding(const torch::Tensor& table, const torch::Tensor& ids) const {
  return torch::embedding(table, ids);  // (..., C)
}

torch::Tensor ReferenceOps::next_token_loss(const torch::Tensor& hidden, const torch::Tensor& w,
                                            const torch::Tensor& targets, double softcap) const {
  return chunked_next_token_loss(hidden, w, targets, 256, dtype_, softcap);
}

torch::Tensor ReferenceOps::mm(const torch::Tensor& a, const torch::Tensor& b) const { return torch::matmul(a, b); }

OpsPtr reference_ops(c10::ScalarType dtype) {
  static const OpsPtr fp32 = std::make_shared<ReferenceOps>(torch::kFloat);
  static const OpsPtr bf16 = std::make_shared<ReferenceOps>(torch::kBFloat16);
  if (dtype == torch::kFloat) return fp32;
  if (dtype == torch::kBFloat16) return bf16;
  return std::make_shared<ReferenceOps>(dtype);
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

torch::Tensor soft_cap(const torch::Tensor& logits, double softcap) {
  return softcap > 0.0 ? torch::tanh(logits / softcap) * softcap : logits;
}

torch::Tensor chunked_next_token_loss(const torch::Tensor& hidden, const torch::Tensor& weight,
                                      const torch::Tensor& targets, int64_t chunk_rows, c10::ScalarType dtype,
                                      double softcap) {
  const ReferenceOps ops(dtype);
  const int64_t C = hidden.size(-1);
  auto h = hidden.reshape({-1, C});       // (N,C)
  auto y = targets.reshape({-1});         // (N)
  const int64_t N = h.size(0);
  torch::Tensor total;
  for (int64_t i = 0; i < N; i += chunk_rows) {
    const int64_t n = std::min(chunk_rows, N - i);
    auto logits = soft_cap(ops.linear(h.narrow(0, i, n), weight, {}), softcap);  // (n,V) fp32
    auto part = torch::nn::functional::cross_entropy(
        logits, y.narrow(0, i, n), torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum));
    total = total.defined() ? total + part : part;
  }
  return total / static_cast<double>(N);
}

}  // namespace lm::model
