#include "model/simd.h"

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

#pragma GCC push_options
#pragma GCC target("avx2,fma")
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

#include "model/simd_loops.inc"

// Rows [0, R) x columns [0, 16) of c (columns [0, cols) when not `full`, cols < 16): the sums over k of op(a)'s
// row times b's row k, then alpha, beta. op(a)'s element (r, k) is a[r lda + k], or a[k lda + r] when TA.
template <int R, bool TA, bool full>
void gemm_block(const float* a, int64_t lda, const float* b, int64_t ldb, int64_t K,
                                                    float alpha, float beta, float* c, int64_t ldc, int cols) {
  __m256i m0 = _mm256_setzero_si256(), m1 = _mm256_setzero_si256();
  if (!full) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    m0 = _mm256_cmpgt_epi32(_mm256_set1_epi32(cols), lane);
    m1 = _mm256_cmpgt_epi32(_mm256_set1_epi32(cols - 8), lane);
  }
  __m256 acc[R][2];
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  for (int64_t k = 0; k < K; ++k) {
    const float* bk = b + k * ldb;
    const __m256 b0 = full ? _mm256_loadu_ps(bk) : _mm256_maskload_ps(bk, m0);
    const __m256 b1 = full ? _mm256_loadu_ps(bk + 8) : _mm256_maskload_ps(bk + 8, m1);
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      const __m256 x = _mm256_broadcast_ss(TA ? a + k * lda + r : a + r * lda + k);
      acc[r][0] = _mm256_fmadd_ps(x, b0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(x, b1, acc[r][1]);
    }
  }
  const __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) {
    float* cr = c + r * ldc;
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m256i m = h == 0 ? m0 : m1;
      __m256 v = _mm256_mul_ps(acc[r][h], va);
      if (beta != 0.0f) {
        v = _mm256_fmadd_ps(full ? _mm256_loadu_ps(cr + 8 * h) : _mm256_maskload_ps(cr + 8 * h, m), vb, v);
      }
      if (full) {
        _mm256_storeu_ps(cr + 8 * h, v);
      } else {
        _mm256_maskstore_ps(cr + 8 * h, m, v);
      }
    }
  }
}

template <int R, bool TA>
void gemm_rows(const float* a, int64_t lda, const float* b, int64_t ldb, int64_t N,
                                                   int64_t K, float alpha, float beta, float* c, int64_t ldc) {
  int64_t j = 0;
  for (; j + 16 <= N; j += 16) gemm_block<R, TA, true>(a, lda, b + j, ldb, K, alpha, beta, c + j, ldc, 16);
  if (j < N) gemm_block<R, TA, false>(a, lda, b + j, ldb, K, alpha, beta, c + j, ldc, static_cast<int>(N - j));
}

template <bool TA>
void small_gemm_avx2(int64_t M, int64_t N, int64_t K, float alpha, const float* a,
                                                         int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                                                         int64_t ldc) {
  // Row r of op(a) starts at a + r lda, or at a + r when transposed.
  const int64_t step = TA ? 1 : lda;
  int64_t i = 0;
  for (; i + 6 <= M; i += 6) gemm_rows<6, TA>(a + i * step, lda, b, ldb, N, K, alpha, beta, c + i * ldc, ldc);
  const float* ai = a + i * step;
  float* ci = c + i * ldc;
  switch (M - i) {
    case 5: gemm_rows<5, TA>(ai, lda, b, ldb, N, K, alpha, beta, ci, ldc); break;
    case 4: gemm_rows<4, TA>(ai, lda, b, ldb, N, K, alpha, beta, ci, ldc); break;
    case 3: gemm_rows<3, TA>(ai, lda, b, ldb, N, K, alpha, beta, ci, ldc); break;
    case 2: gemm_rows<2, TA>(ai, lda, b, ldb, N, K, alpha, beta, ci, ldc); break;
    case 1: gemm_rows<1, TA>(ai, lda, b, ldb, N, K, alpha, beta, ci, ldc); break;
    default: break;
  }
}

// The transpose of the 8 x 8 block at s (rows ls apart) into d (rows ld apart).
void transpose8(const float* s, int64_t ls, float* d, int64_t ld) {
  __m256 r[8], t[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(s + i * ls);
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);      // a0 b0 a1 b1 | a4 b4 a5 b5
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);  // a2 b2 a3 b3 | a6 b6 a7 b7
  }
  for (int i = 0; i < 8; i += 4) {
    for (int h = 0; h < 2; ++h) {
      r[i + 2 * h] = _mm256_shuffle_ps(t[i + h], t[i + 2 + h], _MM_SHUFFLE(1, 0, 1, 0));      // a b c d, column 2h (+4)
      r[i + 2 * h + 1] = _mm256_shuffle_ps(t[i + h], t[i + 2 + h], _MM_SHUFFLE(3, 2, 3, 2));  // column 2h + 1 (+4)
    }
  }
  for (int c = 0; c < 4; ++c) {
    _mm256_storeu_ps(d + c * ld, _mm256_permute2f128_ps(r[c], r[4 + c], 0x20));
    _mm256_storeu_ps(d + (c + 4) * ld, _mm256_permute2f128_ps(r[c], r[4 + c], 0x31));
  }
}

void transpose_avx2(const float* src, int64_t rows, int64_t cols, int64_t lds, float* dst,
                                                        int64_t ldd) {
  const int64_t r8 = rows / 8 * 8, c8 = cols / 8 * 8;
  for (int64_t i = 0; i < r8; i += 8) {
    for (int64_t j = 0; j < c8; j += 8) transpose8(src + i * lds + j, lds, dst + j * ldd + i, ldd);
  }
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = i < r8 ? c8 : 0; j < cols; ++j) dst[j * ldd + i] = src[i * lds + j];
  }
}

}  // namespace
}  // namespace avx2
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx512f,avx2,fma")
// GCC 12's avx512fintrin.h starts some intrinsics from a deliberately undefined vector and warns about it.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
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

#include "model/simd_loops.inc"

}  // namespace
}  // namespace avx512
#pragma GCC diagnostic pop
#pragma GCC pop_options

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

void cap_simd_lanes(int lanes) { g_cap.store(lanes, std::memory_order_relaxed); }

bool simd_loops() { return simd_lanes() >= 8; }

bool gelu_forward(const float* x, float* y, float* d, int64_t n) {
  switch (simd_lanes()) {
    case 16: avx512::gelu_forward(x, y, d, n); return true;
    case 8: avx2::gelu_forward(x, y, d, n); return true;
    default: return false;
  }
}

bool multiply_rows(const float* g, const float* d, float* dx, int64_t rows, int64_t cols, float* col_sums) {
  switch (simd_lanes()) {
    case 16: avx512::multiply_rows(g, d, dx, rows, cols, col_sums); return true;
    case 8: avx2::multiply_rows(g, d, dx, rows, cols, col_sums); return true;
    default: return false;
  }
}

bool add_column_sums(const float* a, int64_t rows, int64_t cols, float* col_sums) {
  switch (simd_lanes()) {
    case 16: avx512::column_sums(a, rows, cols, col_sums); return true;
    case 8: avx2::column_sums(a, rows, cols, col_sums); return true;
    default: return false;
  }
}

bool softmax_row(const float* x, float* y, int64_t n, double* log_norm) {
  switch (simd_lanes()) {
    case 16: return avx512::softmax(x, y, n, log_norm);
    case 8: return avx2::softmax(x, y, n, log_norm);
    default: return false;
  }
}

bool softmax_backward_row(const float* p, const float* dp, float* ds, int64_t n) {
  switch (simd_lanes()) {
    case 16: avx512::softmax_backward(p, dp, ds, n); return true;
    case 8: avx2::softmax_backward(p, dp, ds, n); return true;
    default: return false;
  }
}

bool transpose(const float* src, int64_t rows, int64_t cols, int64_t lds, float* dst, int64_t ldd) {
  if (!simd_loops()) return false;
  avx2::transpose_avx2(src, rows, cols, lds, dst, ldd);
  return true;
}

bool small_gemm(int64_t M, int64_t N, int64_t K, float alpha, const float* a, int64_t lda, bool ta, const float* b,
                int64_t ldb, float beta, float* c, int64_t ldc) {
  if (!simd_loops()) return false;
  if (ta) {
    avx2::small_gemm_avx2<true>(M, N, K, alpha, a, lda, b, ldb, beta, c, ldc);
  } else {
    avx2::small_gemm_avx2<false>(M, N, K, alpha, a, lda, b, ldb, beta, c, ldc);
  }
  return true;
}

}  // namespace lm::model::kernels

#else  // not x86: no AVX2, the callers take LibTorch's ops

namespace lm::model::kernels {

bool simd_loops() { return false; }
int simd_lanes() { return 0; }
void cap_simd_lanes(int) {}
bool gelu_forward(const float*, float*, float*, int64_t) { return false; }
bool multiply_rows(const float*, const float*, float*, int64_t, int64_t, float*) { return false; }
bool add_column_sums(const float*, int64_t, int64_t, float*) { return false; }
bool softmax_row(const float*, float*, int64_t, double*) { return false; }
bool softmax_backward_row(const float*, const float*, float*, int64_t) { return false; }
bool small_gemm(int64_t, int64_t, int64_t, float, const float*, int64_t, bool, const float*, int64_t, float, float*,
                int64_t) {
  return false;
}
bool transpose(const float*, int64_t, int64_t, int64_t, float*, int64_t) { return false; }

}  // namespace lm::model::kernels

#endif
