// kernels::causal_attention: one (sequence, head) pair at a time per thread, straight from the fused qkv
// projection's layout to the output's (only the pair's K and V copied, transposed, for simd.h's small
// products); queries in blocks of kQueryBlock rows, each scored against the keys up to its last row only,
// so much of the masked upper triangle is never computed (3/4 of the full T x T work at T 128, 9/16 at
// T 512). Heads are addressed by pointer arithmetic on the qkv, output and weight buffers (a few tensor
// views per product, not a dozen per head).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <vector>

#include "model/kernels.h"
#include "model/simd.h"
#include "util/threads.h"

namespace lm::model::kernels {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Measured (B 16 T 128, forward + backward, dK/dV written by the last block first): 64 rows 0.80x the
// time of 128, 32 rows about the same as 64; at T 512 64 is as fast as 128.
constexpr int64_t kQueryBlock = 64;

// A row-major matrix whose rows are `ld` floats apart, read transposed when `t`.
struct Mat {
  const float* p;
  int64_t ld;
  bool t = false;
};

// op(x) as a (rows, cols) tensor over x's memory: a view, no copy.
at::Tensor view_of(const Mat& x, int64_t rows, int64_t cols) {
  auto* p = const_cast<float*>(x.p);
  return x.t ? at::from_blob(p, {rows, cols}, {1, x.ld}, at::kFloat) : at::from_blob(p, {rows, cols}, {x.ld, 1}, at::kFloat);
}

// Row-major c (M x N, rows ldc apart) = alpha op(a) op(b) + beta c, op(a) M x K and op(b) K x N, on the
// calling thread; beta 0 ignores c's old contents. simd.h's small_gemm when b is read as it is (the callers
// hand it K^T and V^T already transposed); else straight to the BLAS's cblas_sgemm where it has one (a
// LibTorch call and its tensor views cost about as much as the product at these sizes), else LibTorch's addmm.
void gemm(int64_t M, int64_t N, int64_t K, float alpha, const Mat& a, const Mat& b, float beta, float* c, int64_t ldc) {
  if (!b.t && small_gemm(M, N, K, alpha, a.p, a.ld, a.t, b.p, b.ld, beta, c, ldc)) return;
  static const util::SgemmFn sgemm = util::cblas_sgemm();
  if (sgemm != nullptr) {
    constexpr int kRowMajor = 101, kNo = 111, kYes = 112;
    sgemm(kRowMajor, a.t ? kYes : kNo, b.t ? kYes : kNo, static_cast<int>(M), static_cast<int>(N), static_cast<int>(K),
          alpha, a.p, static_cast<int>(a.ld), b.p, static_cast<int>(b.ld), beta, c, static_cast<int>(ldc));
    return;
  }
  at::Tensor out = view_of({c, ldc}, M, N);
  at::addmm_out(out, out, view_of(a, M, K), view_of(b, K, N), beta, alpha);
}

// x^T for x (rows x cols, rows ld apart): its transpose written into `buf` (cols x rows) by simd.h, which
// small_gemm then reads row by row; else x read transposed in place (the BLAS's own layout does the rest).
Mat transposed(const float* x, int64_t rows, int64_t cols, int64_t ld, std::vector<float>& buf) {
  if (transpose(x, rows, cols, ld, buf.data(), rows)) return {buf.data(), rows};
  return {x, ld, true};
}

// Where pair i (sequence i / H, head i % H) starts in a (B,T,width) buffer whose heads are D columns wide.
int64_t head_at(int64_t i, int64_t H, int64_t T, int64_t width, int64_t D) { return (i / H) * T * width + (i % H) * D; }

// Query block i holds rows [r0, r0 + n) and sees keys [0, r0 + n). Its attention weights are stored
// contiguously (n x (r0+n)), block after block: `offset` floats into a pair's weights.
struct QueryBlock {
  int64_t r0, n, offset;
  int64_t keys() const { return r0 + n; }
};

std::vector<QueryBlock> query_blocks(int64_t T) {
  std::vector<QueryBlock> out;
  int64_t offset = 0;
  for (int64_t r0 = 0; r0 < T; r0 += kQueryBlock) {
    const int64_t n = std::min(kQueryBlock, T - r0);
    out.push_back({r0, n, offset});
    offset += n * (r0 + n);
  }
  return out;
}

int64_t weights_per_pair(const std::vector<QueryBlock>& blocks) {
  return blocks.back().offset + blocks.back().n * blocks.back().keys();
}

// The weights of block q of pair row `pi` (one pair's flat weights) as an (n, keys) matrix.
at::Tensor block_weights(const at::Tensor& pi, const QueryBlock& q) {
  return pi.narrow(0, q.offset, q.n * q.keys()).view({q.n, q.keys()});
}

// Sets the scores of keys after each query row (the future) to -inf: row r of block q sees keys [0, q.r0 + r].
void mask_future(at::Tensor& s, const QueryBlock& q) {
  float* d = s.data_ptr<float>();
  const int64_t keys = q.keys();
  for (int64_t r = 0; r < q.n; ++r) {
    std::fill(d + r * keys + q.r0 + r + 1, d + (r + 1) * keys, -std::numeric_limits<float>::infinity());
  }
}

// body() once on each of LibTorch's threads (once on the calling thread inside a parallel region). The
// (sequence, head) pairs are handed out one at a time from a shared counter, so a faster thread takes more
// of them; each pair's result is the same whichever thread makes it.
template <typename Body>
void each_thread(const Body& body) {
  at::parallel_for(0, at::get_num_threads(), 1, [&](int64_t /*begin*/, int64_t /*end*/) { body(); });
}

// w = the causal softmax of scores s, row by row over each row's own keys (simd.h) and zeros after them;
// LibTorch's softmax of the masked scores on a CPU without AVX2 or when a row holds a NaN or an infinity.
void softmax_causal(at::Tensor& s, at::Tensor& w, const QueryBlock& q) {
  float *sp = s.data_ptr<float>(), *wp = w.data_ptr<float>();
  const int64_t keys = q.keys();
  for (int64_t r = 0; r < q.n; ++r) {
    const int64_t seen = q.r0 + r + 1;
    double log_norm = 0.0;
    if (!softmax_row(sp + r * keys, wp + r * keys, seen, &log_norm)) {
      mask_future(s, q);
      at::_softmax_out(w, s, 1, false);
      return;
    }
    std::fill(wp + r * keys + seen, wp + (r + 1) * keys, 0.0f);
  }
}

// ds = the softmax's backward of dp for causal weights w (zero after each row's keys, and so is ds).
// LibTorch's softmax backward on a CPU without AVX2.
void softmax_causal_backward(at::Tensor& ds, const at::Tensor& dp, const at::Tensor& w, const QueryBlock& q) {
  float* dsp = ds.data_ptr<float>();
  const float *dpp = dp.data_ptr<float>(), *wp = w.data_ptr<float>();
  const int64_t keys = q.keys();
  for (int64_t r = 0; r < q.n; ++r) {
    const int64_t seen = q.r0 + r + 1, o = r * keys;
    if (!softmax_backward_row(wp + o, dpp + o, dsp + o, seen)) {
      at::_softmax_backward_data_out(ds, dp, w, 1, at::kFloat);  // masked: P = 0
      return;
    }
    std::fill(dsp + o + seen, dsp + o + keys, 0.0f);
  }
}

struct AttentionFn : public torch::autograd::Function<AttentionFn> {
  // qkv (B,T,3C) contiguous -> y (B,T,C); keeps the attention weights (B*H, ragged blocks) for backward.
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& qkv, int64_t H) {
    const int64_t B = qkv.size(0), T = qkv.size(1), C = qkv.size(2) / 3, D = C / H, L = 3 * C;
    const auto scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
    const auto blocks = query_blocks(T);
    at::Tensor p = at::empty({B * H, weights_per_pair(blocks)}, qkv.options());
    at::Tensor y = at::empty({B, T, C}, qkv.options());
    const float* qkv_p = qkv.data_ptr<float>();
    float* y_p = y.data_ptr<float>();
    std::atomic<int64_t> next{0};
    each_thread([&] {
      const c10::AutoGradMode no_autograd(false);  // thread-local: off on the pool's threads too
      at::Tensor scores = at::empty({kQueryBlock * T}, qkv.options());
      std::vector<float> kt(static_cast<size_t>(D * T));
      for (int64_t i = next++; i < B * H; i = next++) {
        // Head h of sequence b: q, k, v are (T,D) with rows L apart; its output (T,D) with rows C apart.
        const float* q = qkv_p + head_at(i, H, T, L, D);
        const float *k = q + C, *v = q + 2 * C;
        float* yi = y_p + head_at(i, H, T, C, D);
        const Mat kt_of = transposed(k, T, D, L, kt);
        for (const QueryBlock& qb : blocks) {
          at::Tensor s = scores.narrow(0, 0, qb.n * qb.keys()).view({qb.n, qb.keys()});
          gemm(qb.n, qb.keys(), D, scale, {q + qb.r0 * L, L}, kt_of, 0.f, s.data_ptr<float>(), qb.keys());
          at::Tensor w = block_weights(p.select(0, i), qb);
          softmax_causal(s, w, qb);
          gemm(qb.n, D, qb.keys(), 1.f, {w.data_ptr<float>(), qb.keys()}, {v, L}, 0.f, yi + qb.r0 * C, C);
        }
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
    const auto blocks = query_blocks(T);
    const at::Tensor dy = grads[0].contiguous();  // (B,T,C)
    at::Tensor dqkv = at::empty_like(qkv);
    const float *qkv_p = qkv.data_ptr<float>(), *dy_p = dy.data_ptr<float>();
    float* dqkv_p = dqkv.data_ptr<float>();
    std::atomic<int64_t> next{0};
    each_thread([&] {
      const c10::AutoGradMode no_autograd(false);  // thread-local: off on the pool's threads too
      at::Tensor buf = at::empty({kQueryBlock * T}, qkv.options()), dsbuf = at::empty({kQueryBlock * T}, qkv.options());
      std::vector<float> vt(static_cast<size_t>(D * T));
      for (int64_t i = next++; i < B * H; i = next++) {
        const float* q = qkv_p + head_at(i, H, T, L, D);
        const float *k = q + C, *v = q + 2 * C;
        const Mat vt_of = transposed(v, T, D, L, vt);
        const float* dyi = dy_p + head_at(i, H, T, C, D);  // dY (T,D), rows C apart
        float* dq = dqkv_p + head_at(i, H, T, L, D);
        float *dk = dq + C, *dv = dq + 2 * C;
        // Keys and values collect from every query block that sees them. The last block sees all keys:
        // taken first, it writes the whole of dK and dV (beta 0), and the others add to them.
        for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) {
          const QueryBlock& qb = *it;
          const int64_t keys = qb.keys();
          const float beta = it == blocks.rbegin() ? 0.f : 1.f;
          const at::Tensor w = block_weights(p.select(0, i), qb);
          const float* dyb = dyi + qb.r0 * C;
          at::Tensor dp = buf.narrow(0, 0, qb.n * keys).view({qb.n, keys});
          gemm(qb.n, keys, D, 1.f, {dyb, C}, vt_of, 0.f, dp.data_ptr<float>(), keys);           // dP = dY V^T
          gemm(keys, D, qb.n, 1.f, {w.data_ptr<float>(), keys, true}, {dyb, C}, beta, dv, L);   // dV += P^T dY
          at::Tensor ds = dsbuf.narrow(0, 0, qb.n * keys).view({qb.n, keys});
          softmax_causal_backward(ds, dp, w, qb);
          const float* dsp = ds.data_ptr<float>();
          gemm(qb.n, D, keys, scale, {dsp, keys}, {k, L}, 0.f, dq + qb.r0 * L, L);                  // dQ = dS K
          gemm(keys, D, qb.n, scale, {dsp, keys, true}, {q + qb.r0 * L, L}, beta, dk, L);           // dK += dS^T Q
        }
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
