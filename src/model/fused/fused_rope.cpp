// kernels::prepare_qk: q and k of a fused projection made ready for the scores (qk_norm's RMS scaling, then
// rope's rotation) in one pass over the rows, and its gradient in one pass back, instead of the reference
// set's chain of tensor ops (views, squares, means, narrows, concatenations, a stack) and their autograd nodes.
// The rows' loops are simd.h's (qk_rows); the scalar loops below serve a CPU without AVX2.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <cmath>

#include "model/fused/kernels.h"
#include "model/fused/simd.h"

namespace lm::model::kernels {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr float kQkEps = 1e-6f;  // as Ops::prepare_qk

// One head's vector x (D) -> out: scaled to unit RMS (norm; its factor returned), then rotated by c, s (D/2).
float forward_head(const float* x, float* out, const float* c, const float* s, int64_t D, bool norm, bool rope) {
  float r = 1.0f;
  if (norm) {
    float sq = 0.0f;
    for (int64_t i = 0; i < D; ++i) sq += x[i] * x[i];
    r = 1.0f / std::sqrt(sq / static_cast<float>(D) + kQkEps);
  }
  const int64_t half = D / 2;
  if (!rope) {
    for (int64_t i = 0; i < D; ++i) out[i] = x[i] * r;
    return r;
  }
  for (int64_t i = 0; i < half; ++i) {
    const float a = x[i] * r, b = x[i + half] * r;
    out[i] = a * c[i] - b * s[i];
    out[i + half] = b * c[i] + a * s[i];
  }
  return r;
}

// The gradient of forward_head: g (D) of out -> dx (D), from x and its factor r.
void backward_head(const float* g, const float* x, float r, float* dx, const float* c, const float* s, int64_t D,
                   bool norm, bool rope) {
  const int64_t half = D / 2;
  if (rope) {  // the inverse rotation: the gradient of the normalised vector n
    for (int64_t i = 0; i < half; ++i) {
      dx[i] = g[i] * c[i] + g[i + half] * s[i];
      dx[i + half] = g[i + half] * c[i] - g[i] * s[i];
    }
  } else {
    for (int64_t i = 0; i < D; ++i) dx[i] = g[i];
  }
  if (!norm) return;
  // n = x r, r = (mean(x^2) + eps)^(-1/2): dx = r (gn - n mean(gn n))
  float dot = 0.0f;
  for (int64_t i = 0; i < D; ++i) dot += dx[i] * x[i] * r;
  const float m = dot / static_cast<float>(D);
  for (int64_t i = 0; i < D; ++i) dx[i] = r * (dx[i] - x[i] * r * m);
}

struct PrepareQkFn : public torch::autograd::Function<PrepareQkFn> {
  // qkv (N, 3C) contiguous rows of T positions each; cos, sin (T, D/2) contiguous, or empty (no rotation:
  // autograd takes no undefined input).
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& qkv, int64_t T, int64_t H, bool norm,
                               const at::Tensor& cos, const at::Tensor& sin) {
    const int64_t N = qkv.size(0), C = qkv.size(1) / 3, D = C / H;
    const bool rope = cos.numel() > 0;
    at::Tensor out = at::empty_like(qkv);
    at::Tensor factors = at::empty({N, 2, H}, qkv.options());  // each head's r, for backward
    const float* in = qkv.data_ptr<float>();
    float* o = out.data_ptr<float>();
    float* f = factors.data_ptr<float>();
    const float* c = rope ? cos.data_ptr<float>() : nullptr;
    const float* s = rope ? sin.data_ptr<float>() : nullptr;
    at::parallel_for(0, N, 16, [&](int64_t begin, int64_t end) {
      if (qk_rows(in, o, f, c, s, begin, end - begin, T, H, D, norm, kQkEps)) return;  // simd.h
      for (int64_t n = begin; n < end; ++n) {  // a CPU without AVX2
        const float* row = in + n * 3 * C;
        float* dst = o + n * 3 * C;
        const int64_t t = n % T;
        const float* ct = rope ? c + t * (D / 2) : nullptr;
        const float* st = rope ? s + t * (D / 2) : nullptr;
        for (int64_t part = 0; part < 2; ++part) {
          for (int64_t h = 0; h < H; ++h) {
            const int64_t off = part * C + h * D;
            f[(n * 2 + part) * H + h] = forward_head(row + off, dst + off, ct, st, D, norm, rope);
          }
        }
        std::copy(row + 2 * C, row + 3 * C, dst + 2 * C);  // v as it is
      }
    });
    ctx->save_for_backward({qkv, factors, cos, sin});
    ctx->saved_data["T"] = T;
    ctx->saved_data["H"] = H;
    ctx->saved_data["norm"] = norm;
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& qkv = saved[0];
    const at::Tensor& factors = saved[1];
    const bool rope = saved[2].numel() > 0;
    const int64_t T = ctx->saved_data["T"].toInt(), H = ctx->saved_data["H"].toInt();
    const bool norm = ctx->saved_data["norm"].toBool();
    const at::Tensor g = grads[0].contiguous();
    const int64_t N = qkv.size(0), C = qkv.size(1) / 3, D = C / H;
    at::Tensor dx = at::empty_like(qkv);
    const float* in = qkv.data_ptr<float>();
    const float* gp = g.data_ptr<float>();
    const float* f = factors.data_ptr<float>();
    float* d = dx.data_ptr<float>();
    const float* c = rope ? saved[2].data_ptr<float>() : nullptr;
    const float* s = rope ? saved[3].data_ptr<float>() : nullptr;
    at::parallel_for(0, N, 16, [&](int64_t begin, int64_t end) {
      if (qk_rows_backward(gp, in, f, d, c, s, begin, end - begin, T, H, D, norm)) return;  // simd.h
      for (int64_t n = begin; n < end; ++n) {  // a CPU without AVX2
        const int64_t t = n % T, o = n * 3 * C;
        const float* ct = rope ? c + t * (D / 2) : nullptr;
        const float* st = rope ? s + t * (D / 2) : nullptr;
        for (int64_t part = 0; part < 2; ++part) {
          for (int64_t h = 0; h < H; ++h) {
            const int64_t off = o + part * C + h * D;
            backward_head(gp + off, in + off, f[(n * 2 + part) * H + h], d + off, ct, st, D, norm, rope);
          }
        }
        std::copy(gp + o + 2 * C, gp + o + 3 * C, d + o + 2 * C);
      }
    });
    return {dx, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor prepare_qk(const at::Tensor& qkv, int64_t heads, bool qk_norm, const at::Tensor& cos, const at::Tensor& sin) {
  const int64_t B = qkv.size(0), T = qkv.size(1);
  const at::Tensor rows = qkv.reshape({B * T, qkv.size(2)}).contiguous();
  const at::Tensor none = at::empty({0}, qkv.options());
  const at::Tensor c = cos.defined() ? cos.contiguous() : none, s = sin.defined() ? sin.contiguous() : none;
  return PrepareQkFn::apply(rows, T, heads, qk_norm, c, s).view(qkv.sizes());
}

}  // namespace lm::model::kernels
