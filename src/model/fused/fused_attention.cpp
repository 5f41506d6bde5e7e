// kernels::causal_attention: one (sequence, head) pair at a time per thread, straight from the fused qkv
// projection's layout to the output's (only the pair's K and V copied, transposed, for simd.h's small
// products). Each of a pair's six products is computed over its causal triangle only, in blocks of
// kSmallGemmRows rows (simd.h's Causal): the scores up to each block's last key, the sums over the weights
// up to (or, read transposed, from) the block's first or last row; about 0.55 of the full T x T work at
// T 128 (0.75 with the 64-row query blocks before), 0.51 at T 512. Heads are addressed by pointer arithmetic
// on the qkv, output and weight buffers (a few tensor views per pair, not a dozen per head).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <vector>

#include "model/fused/kernels.h"
#include "model/fused/simd.h"

namespace lm::model::kernels {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// A row-major matrix whose rows are `ld` floats apart, read transposed when `t`.
struct Mat {
  const float* p;
  int64_t ld;
  bool t = false;
};

// Row-major c (M x N, rows ldc apart) = alpha op(a) b + beta c, op(a) M x K and b K x N (read as it is: the
// callers hand K^T and V^T already transposed), on the calling thread over the causal `part` (simd.h's
// small_gemm); beta 0 ignores c's old contents.
void gemm(int64_t M, int64_t N, int64_t K, float alpha, const Mat& a, const Mat& b, float beta, float* c, int64_t ldc,
          Causal part) {
  small_gemm(M, N, K, alpha, a.p, a.ld, a.t, b.p, b.ld, beta, c, ldc, part);
}

// x^T for x (rows x cols, rows ld apart): its transpose written into `buf` (cols x rows) by simd.h, which
// small_gemm then reads row by row.
Mat transposed(const float* x, int64_t rows, int64_t cols, int64_t ld, std::vector<float>& buf) {
  transpose(x, rows, cols, ld, buf.data(), rows);
  return {buf.data(), rows};
}

// Where pair i (sequence i / H, head i % H) starts in a (B,T,width) buffer whose heads are D columns wide.
int64_t head_at(int64_t i, int64_t H, int64_t T, int64_t width, int64_t D) { return (i / H) * T * width + (i % H) * D; }

// Sets every entry after each row's keys (the future) to `value`: row r of the T x T matrix m sees keys [0, r].
void fill_future(at::Tensor& m, float value) {
  float* d = m.data_ptr<float>();
  const int64_t T = m.size(0);
  for (int64_t r = 0; r + 1 < T; ++r) std::fill(d + r * T + r + 1, d + (r + 1) * T, value);
}

// body() once on each of LibTorch's threads (once on the calling thread inside a parallel region). The
// (sequence, head) pairs are handed out one at a time from a shared counter, so a faster thread takes more
// of them; each pair's result is the same whichever thread makes it.
template <typename Body>
void each_thread(const Body& body) {
  at::parallel_for(0, at::get_num_threads(), 1, [&](int64_t /*begin*/, int64_t /*end*/) { body(); });
}

// Follows row r (of T) of a weights matrix with zeros in [r + 1, r + kSmallGemmRows): all that small_gemm's
// causal parts read after its keys (a block of kSmallGemmRows rows reads up to its last row). The rest of the
// row is left as it is.
void zeros_after_keys(float* row, int64_t r, int64_t T) {
  std::fill(row + r + 1, row + std::min(T, r + kSmallGemmRows), 0.0f);
}

// w = the causal softmax of the T x T scores s (only each row's own keys read: the rest may be anything), row
// by row (simd.h), each row followed by the zeros the products over w read (above); LibTorch's
// softmax of the masked scores, every row whole, when a row holds a NaN or an infinity.
void softmax_causal(at::Tensor& s, at::Tensor& w) {
  float *sp = s.data_ptr<float>(), *wp = w.data_ptr<float>();
  const int64_t T = s.size(0);
  for (int64_t r = 0; r < T; ++r) {
    double log_norm = 0.0;
    if (!softmax_row(sp + r * T, wp + r * T, r + 1, &log_norm)) {
      fill_future(s, -std::numeric_limits<float>::infinity());
      at::_softmax_out(w, s, 1, false);
      return;
    }
    zeros_after_keys(wp + r * T, r, T);
  }
}

// ds = the softmax's backward of dp for causal weights w (each row's own keys of w and dp read; ds followed by
// the same zeros as w), row by row (simd.h).
void softmax_causal_backward(at::Tensor& ds, const at::Tensor& dp, const at::Tensor& w) {
  float* dsp = ds.data_ptr<float>();
  const float* dpp = dp.data_ptr<float>();
  const float* wp = w.data_ptr<float>();
  const int64_t T = ds.size(0);
  for (int64_t r = 0; r < T; ++r) {
    const int64_t o = r * T;
    softmax_backward_row(wp + o, dpp + o, dsp + o, r + 1);
    zeros_after_keys(dsp + o, r, T);
  }
}

struct AttentionFn : public torch::autograd::Function<AttentionFn> {
  // qkv (B,T,3C) contiguous -> y (B,T,C); keeps the attention weights (B*H, T*T) for backward.
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& qkv, int64_t H) {
    const int64_t B = qkv.size(0), T = qkv.size(1), C = qkv.size(2) / 3, D = C / H, L = 3 * C;
    const auto scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
    at::Tensor p = at::empty({B * H, T * T}, qkv.options());
    at::Tensor y = at::empty({B, T, C}, qkv.options());
    const float* qkv_p = qkv.data_ptr<float>();
    float* y_p = y.data_ptr<float>();
    std::atomic<int64_t> next{0};
    each_thread([&] {
      const c10::AutoGradMode no_autograd(false);  // thread-local: off on the pool's threads too
      at::Tensor s = at::empty({T, T}, qkv.options());
      std::vector<float> kt(static_cast<size_t>(D * T));
      for (int64_t i = next++; i < B * H; i = next++) {
        // Head h of sequence b: q, k, v are (T,D) with rows L apart; its output (T,D) with rows C apart.
        const float* q = qkv_p + head_at(i, H, T, L, D);
        const float *k = q + C, *v = q + 2 * C;
        at::Tensor w = p.select(0, i).view({T, T});
        gemm(T, T, D, scale, {q, L}, transposed(k, T, D, L, kt), 0.f, s.data_ptr<float>(), T, Causal::kColumns);  // S = Q K^T
        softmax_causal(s, w);
        gemm(T, D, T, 1.f, {w.data_ptr<float>(), T}, {v, L}, 0.f, y_p + head_at(i, H, T, C, D), C, Causal::kInnerTo);  // Y = P V
      }
    });
    ctx->save_for_backward({qkv, p});
    ctx->saved_data["heads"] = H;
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& qkv = saved[0];
    const at::Tensor& p = saved[1];
    const int64_t H = ctx->saved_data["heads"].toInt();
    const int64_t B = qkv.size(0), T = qkv.size(1), C = qkv.size(2) / 3, D = C / H, L = 3 * C;
    const auto scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
    const at::Tensor dy = grads[0].contiguous();  // (B,T,C)
    at::Tensor dqkv = at::empty_like(qkv);
    const float *qkv_p = qkv.data_ptr<float>(), *dy_p = dy.data_ptr<float>();
    float* dqkv_p = dqkv.data_ptr<float>();
    std::atomic<int64_t> next{0};
    each_thread([&] {
      const c10::AutoGradMode no_autograd(false);  // thread-local: off on the pool's threads too
      at::Tensor dp = at::empty({T, T}, qkv.options()), ds = at::empty({T, T}, qkv.options());
      const float* dsp = ds.data_ptr<float>();
      std::vector<float> vt(static_cast<size_t>(D * T));
      for (int64_t i = next++; i < B * H; i = next++) {
        const float* q = qkv_p + head_at(i, H, T, L, D);
        const float *k = q + C, *v = q + 2 * C;
        const float* dyi = dy_p + head_at(i, H, T, C, D);  // dY (T,D), rows C apart
        float* dq = dqkv_p + head_at(i, H, T, L, D);
        float *dk = dq + C, *dv = dq + 2 * C;
        const at::Tensor w = p.select(0, i).view({T, T});
        const float* wp = w.data_ptr<float>();
        gemm(T, T, D, 1.f, {dyi, C}, transposed(v, T, D, L, vt), 0.f, dp.data_ptr<float>(), T, Causal::kColumns);  // dP = dY V^T
        gemm(T, D, T, 1.f, {wp, T, true}, {dyi, C}, 0.f, dv, L, Causal::kInnerFrom);  // dV = P^T dY
        softmax_causal_backward(ds, dp, w);
        gemm(T, D, T, scale, {dsp, T}, {k, L}, 0.f, dq, L, Causal::kInnerTo);          // dQ = dS K
        gemm(T, D, T, scale, {dsp, T, true}, {q, L}, 0.f, dk, L, Causal::kInnerFrom);  // dK = dS^T Q
      }
    });
    return {dqkv, at::Tensor()};
  }
};

}  // namespace

at::Tensor causal_attention(const at::Tensor& qkv, int64_t heads) {
  return AttentionFn::apply(qkv.contiguous(), heads);
}

}  // namespace lm::model::kernels
