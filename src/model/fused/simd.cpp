#include "model/fused/simd.h"

#include <stdexcept>

namespace lm::model::kernels {
namespace {

// The loops' answer on a CPU without AVX2 and FMA, where the fused set is refused before any of them runs.
[[noreturn]] void no_loops() {
  throw std::logic_error("the fused kernels' loops need AVX2 and FMA, which this CPU lacks (make_ops refuses the fused set here)");
}

}  // namespace
}  // namespace lm::model::kernels

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <vector>

namespace lm::model::kernels {

namespace {

// Abramowitz & Stegun 7.1.26: erf(z) = 1 - t (a1 + t (a2 + t (a3 + t (a4 + t a5)))) exp(-z^2), t = 1/(1 + p z), z >= 0.
constexpr float kP = 0.3275911f, kA1 = 0.254829592f, kA2 = -0.284496736f, kA3 = 1.421413741f,
                kA4 = -1.453152027f, kA5 = 1.061405429f;
constexpr float kSqrtHalf = 0.70710678118654752f, kInvSqrt2Pi = 0.39894228040143268f;

// Phi(x) and exp(-x^2/2) one float at a time (what is left over after the 8-wide steps).
float cdf_scalar(float x, float& e) {
  const float z = std::fabs(x) * kSqrtHalf, t = 1.0f / (1.0f + kP * z);
  e = std::exp(-0.5f * x * x);
  const float erf_abs = 1.0f - t * (kA1 + t * (kA2 + t * (kA3 + t * (kA4 + t * kA5)))) * e;
  return 0.5f * (1.0f + (x < 0 ? -erf_abs : erf_abs));
}

// Rows summed into a block before it is added to the column sums (multiply_rows, add_column_sums).
constexpr int64_t kSumRows = 64;

}  // namespace

// Each width's code is compiled for its own instruction set: GCC's target pragma, clang's attribute pragma
// (clang ignores the GCC one; the sanitizer and fuzz builds use clang).
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#endif
namespace avx2 {
namespace {

using Vf = __m256;
using Vd = __m256d;
constexpr int64_t kW = 8;
inline Vf vload(const float* p) { return _mm256_loadu_ps(p); }
inline void vstore(float* p, Vf v) { _mm256_storeu_ps(p, v); }
inline Vf vset(float x) { return _mm256_set1_ps(x); }
inline Vf vadd(Vf a, Vf b) { return _mm256_add_ps(a, b); }
inline Vf vsub(Vf a, Vf b) { return _mm256_sub_ps(a, b); }
inline Vf vmul(Vf a, Vf b) { return _mm256_mul_ps(a, b); }
inline Vf vdiv(Vf a, Vf b) { return _mm256_div_ps(a, b); }
inline Vf vmin(Vf a, Vf b) { return _mm256_min_ps(a, b); }
inline Vf vmax(Vf a, Vf b) { return _mm256_max_ps(a, b); }
inline Vf vfmadd(Vf a, Vf b, Vf c) { return _mm256_fmadd_ps(a, b, c); }   // a b + c
inline Vf vfnmadd(Vf a, Vf b, Vf c) { return _mm256_fnmadd_ps(a, b, c); }  // c - a b
inline Vf vfloor(Vf a) { return _mm256_floor_ps(a); }
inline Vf vabs(Vf a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a); }
// a, negated where s < 0
inline Vf vsign_of(Vf a, Vf s) { return _mm256_xor_ps(a, _mm256_and_ps(_mm256_set1_ps(-0.0f), s)); }
inline Vf vpow2(Vf n) {  // 2^n for whole n in [-127, 128]
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23));
}
inline float vmax_lanes(Vf v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_max_ss(m, _mm_shuffle_ps(m, m, 1)));
}
inline float vsum_lanes(Vf v) {
  const __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  return _mm_cvtss_f32(_mm_hadd_ps(_mm_hadd_ps(h, h), _mm_hadd_ps(h, h)));
}
inline Vd vdzero() { return _mm256_setzero_pd(); }
inline void vdadd(Vd& lo, Vd& hi, Vf e) {  // e's lanes added in double: the low half into lo, the high into hi
  lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
  hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
}
inline double vdsum(Vd lo, Vd hi) {
  const __m256d v = _mm256_add_pd(lo, hi);
  const __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
  return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

#include "model/fused/simd_loops.inc"

#include "model/fused/simd_gemm.inc"

}  // namespace
}  // namespace avx2
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx2,fma")
// GCC 12's avx512fintrin.h starts some intrinsics from a deliberately undefined vector and warns about it.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
namespace avx512 {
namespace {

using Vf = __m512;
using Vd = __m512d;
constexpr int64_t kW = 16;
inline Vf vload(const float* p) { return _mm512_loadu_ps(p); }
inline void vstore(float* p, Vf v) { _mm512_storeu_ps(p, v); }
inline Vf vset(float x) { return _mm512_set1_ps(x); }
inline Vf vadd(Vf a, Vf b) { return _mm512_add_ps(a, b); }
inline Vf vsub(Vf a, Vf b) { return _mm512_sub_ps(a, b); }
inline Vf vmul(Vf a, Vf b) { return _mm512_mul_ps(a, b); }
inline Vf vdiv(Vf a, Vf b) { return _mm512_div_ps(a, b); }
inline Vf vmin(Vf a, Vf b) { return _mm512_min_ps(a, b); }
inline Vf vmax(Vf a, Vf b) { return _mm512_max_ps(a, b); }
inline Vf vfmadd(Vf a, Vf b, Vf c) { return _mm512_fmadd_ps(a, b, c); }
inline Vf vfnmadd(Vf a, Vf b, Vf c) { return _mm512_fnmadd_ps(a, b, c); }
inline Vf vfloor(Vf a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC); }
inline Vf vabs(Vf a) {
  return _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(a), _mm512_set1_epi32(0x7fffffff)));
}
inline Vf vsign_of(Vf a, Vf s) {
  const __m512i sign = _mm512_and_si512(_mm512_castps_si512(s), _mm512_set1_epi32(static_cast<int>(0x80000000u)));
  return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(a), sign));
}
inline Vf vpow2(Vf n) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23));
}
inline float vmax_lanes(Vf v) { return _mm512_reduce_max_ps(v); }
inline float vsum_lanes(Vf v) { return _mm512_reduce_add_ps(v); }
inline Vd vdzero() { return _mm512_setzero_pd(); }
inline void vdadd(Vd& lo, Vd& hi, Vf e) {
  lo = _mm512_add_pd(lo, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
  hi = _mm512_add_pd(hi, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1))));
}
inline double vdsum(Vd lo, Vd hi) { return _mm512_reduce_add_pd(_mm512_add_pd(lo, hi)); }

#include "model/fused/simd_loops.inc"

}  // namespace
}  // namespace avx512
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif

namespace {

// 16 (AVX-512), 8 (AVX2 + FMA) or 0 (neither): what this CPU runs; cap_simd_lanes lowers it.
int cpu_lanes() {
  static const int lanes = !__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma") ? 0
                           : __builtin_cpu_supports("avx512f")                               ? 16
                                                                                             : 8;
  return lanes;
}
std::atomic<int> g_cap{16};

}  // namespace

int simd_lanes() { return std::min(cpu_lanes(), g_cap.load(std::memory_order_relaxed)); }

// A cap between the widths takes the narrower; below 8, 8 (the loops have no narrower form).
void cap_simd_lanes(int lanes) { g_cap.store(lanes >= 16 ? 16 : 8, std::memory_order_relaxed); }

bool simd_loops() { return simd_lanes() >= 8; }

void gelu_forward(const float* x, float* y, float* d, int64_t n) {
  switch (simd_lanes()) {
    case 16: return avx512::gelu_forward(x, y, d, n);
    case 8: return avx2::gelu_forward(x, y, d, n);
    default: no_loops();
  }
}

void relu2_forward(const float* x, float* y, float* d, int64_t n) {
  switch (simd_lanes()) {
    case 16: return avx512::relu2_forward(x, y, d, n);
    case 8: return avx2::relu2_forward(x, y, d, n);
    default: no_loops();
  }
}

void multiply_rows(const float* g, const float* d, float* dx, int64_t rows, int64_t cols, float* col_sums) {
  switch (simd_lanes()) {
    case 16: return avx512::multiply_rows(g, d, dx, rows, cols, col_sums);
    case 8: return avx2::multiply_rows(g, d, dx, rows, cols, col_sums);
    default: no_loops();
  }
}

void add_column_sums(const float* a, int64_t rows, int64_t cols, float* col_sums) {
  switch (simd_lanes()) {
    case 16: return avx512::column_sums(a, rows, cols, col_sums);
    case 8: return avx2::column_sums(a, rows, cols, col_sums);
    default: no_loops();
  }
}

bool softmax_row(const float* x, float* y, int64_t n, double* log_norm) {
  switch (simd_lanes()) {
    case 16: return avx512::softmax(x, y, n, log_norm);
    case 8: return avx2::softmax(x, y, n, log_norm);
    default: no_loops();
  }
}

void softmax_backward_row(const float* p, const float* dp, float* ds, int64_t n) {
  switch (simd_lanes()) {
    case 16: return avx512::softmax_backward(p, dp, ds, n);
    case 8: return avx2::softmax_backward(p, dp, ds, n);
    default: no_loops();
  }
}

void qk_rows(const float* in, float* out, float* factors, const float* c, const float* s, int64_t first, int64_t rows,
             int64_t T, int64_t H, int64_t D, bool norm, float eps) {
  switch (simd_lanes()) {
    case 16: return avx512::qk_rows(in, out, factors, c, s, first, rows, T, H, D, norm, eps);
    case 8: return avx2::qk_rows(in, out, factors, c, s, first, rows, T, H, D, norm, eps);
    default: no_loops();
  }
}

void qk_rows_backward(const float* g, const float* in, const float* factors, float* dx, const float* c, const float* s,
                      int64_t first, int64_t rows, int64_t T, int64_t H, int64_t D, bool norm) {
  switch (simd_lanes()) {
    case 16: return avx512::qk_rows_backward(g, in, factors, dx, c, s, first, rows, T, H, D, norm);
    case 8: return avx2::qk_rows_backward(g, in, factors, dx, c, s, first, rows, T, H, D, norm);
    default: no_loops();
  }
}

void transpose(const float* src, int64_t rows, int64_t cols, int64_t lds, float* dst, int64_t ldd) {
  if (!simd_loops()) no_loops();
  avx2::transpose_avx2(src, rows, cols, lds, dst, ldd);
}

void small_gemm(int64_t M, int64_t N, int64_t K, float alpha, const float* a, int64_t lda, bool ta, const float* b,
                int64_t ldb, float beta, float* c, int64_t ldc, Causal part) {
  if (!simd_loops()) no_loops();
  if (ta) {
    avx2::small_gemm_avx2<true>(M, N, K, alpha, a, lda, b, ldb, beta, c, ldc, part);
  } else {
    avx2::small_gemm_avx2<false>(M, N, K, alpha, a, lda, b, ldb, beta, c, ldc, part);
  }
}

}  // namespace lm::model::kernels

#else  // not x86: no AVX2, so the fused set is refused (model/make_ops.cpp) and nothing calls the loops

namespace lm::model::kernels {

bool simd_loops() { return false; }
int simd_lanes() { return 0; }
void cap_simd_lanes(int) {}
void gelu_forward(const float*, float*, float*, int64_t) { no_loops(); }
void relu2_forward(const float*, float*, float*, int64_t) { no_loops(); }
void multiply_rows(const float*, const float*, float*, int64_t, int64_t, float*) { no_loops(); }
void add_column_sums(const float*, int64_t, int64_t, float*) { no_loops(); }
bool softmax_row(const float*, float*, int64_t, double*) { no_loops(); }
void softmax_backward_row(const float*, const float*, float*, int64_t) { no_loops(); }
void small_gemm(int64_t, int64_t, int64_t, float, const float*, int64_t, bool, const float*, int64_t, float, float*,
                int64_t, Causal) {
  no_loops();
}
void transpose(const float*, int64_t, int64_t, int64_t, float*, int64_t) { no_loops(); }
void qk_rows(const float*, float*, float*, const float*, const float*, int64_t, int64_t, int64_t, int64_t, int64_t, bool,
             float) {
  no_loops();
}
void qk_rows_backward(const float*, const float*, const float*, float*, const float*, const float*, int64_t, int64_t,
                      int64_t, int64_t, int64_t, bool) {
  no_loops();
}

}  // namespace lm::model::kernels

#endif
