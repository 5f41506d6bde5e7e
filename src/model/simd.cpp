#include "model/simd.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include <algorithm>
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

// exp(x) for 8 floats (Cephes' expf: x = n ln2 + r, e^r by a degree-6 polynomial, 2^n into the exponent);
// x is clamped to [-87.33, 88.37], so below -87.33 it gives ~1.2e-38, not 0.
inline __attribute__((target("avx2,fma"), always_inline)) __m256 exp8(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.33f)), _mm256_set1_ps(88.37f));
  const __m256 n = _mm256_floor_ps(_mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504088896341f), _mm256_set1_ps(0.5f)));
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 y = _mm256_set1_ps(1.9875691500e-4f);
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.3981999507e-3f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(8.3334519073e-3f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(4.1665795894e-2f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.6666665459e-1f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(5.0000001201e-1f));
  y = _mm256_fmadd_ps(y, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i pow2 = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(y, _mm256_castsi256_ps(pow2));
}

// Phi(x) for 8 floats; `e` gets exp(-x^2/2).
__attribute__((target("avx2,fma"))) __m256 cdf8(__m256 x, __m256& e) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256 z = _mm256_mul_ps(_mm256_andnot_ps(sign, x), _mm256_set1_ps(kSqrtHalf));
  const __m256 t = _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_fmadd_ps(z, _mm256_set1_ps(kP), _mm256_set1_ps(1.0f)));
  e = exp8(_mm256_mul_ps(_mm256_mul_ps(x, x), _mm256_set1_ps(-0.5f)));
  __m256 p = _mm256_fmadd_ps(t, _mm256_set1_ps(kA5), _mm256_set1_ps(kA4));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(kA3));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(kA2));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(kA1));
  const __m256 erf_abs = _mm256_fnmadd_ps(_mm256_mul_ps(p, t), e, _mm256_set1_ps(1.0f));
  const __m256 erf = _mm256_xor_ps(erf_abs, _mm256_and_ps(sign, x));  // erf is odd
  return _mm256_mul_ps(_mm256_add_ps(erf, _mm256_set1_ps(1.0f)), _mm256_set1_ps(0.5f));
}

// y = GELU(x) and, when `d` is not null, d = GELU'(x) = Phi(x) + x phi(x), from the same Phi and exp.
__attribute__((target("avx2,fma"))) void gelu_forward_avx2(const float* x, float* y, float* d, int64_t n) {
  const int64_t wide = n / 8 * 8;
  for (int64_t i = 0; i < wide; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    __m256 e;
    const __m256 cdf = cdf8(v, e);
    _mm256_storeu_ps(y + i, _mm256_mul_ps(v, cdf));
    if (d) _mm256_storeu_ps(d + i, _mm256_fmadd_ps(_mm256_mul_ps(v, e), _mm256_set1_ps(kInvSqrt2Pi), cdf));
  }
  for (int64_t i = wide; i < n; ++i) {
    float e = 0.0f;
    const float cdf = cdf_scalar(x[i], e);
    y[i] = x[i] * cdf;
    if (d) d[i] = cdf + x[i] * e * kInvSqrt2Pi;
  }
}

// Row r's values (8 at a time, then one at a time) into `block`, which is added to col_sums and zeroed every
// 64 rows: one loop for the GELU's backward (`wide8` computes and stores dx) and for plain column sums.
constexpr int64_t kSumRows = 64;

template <typename Wide, typename One>
__attribute__((target("avx2,fma"))) void rows_with_sums(int64_t rows, int64_t cols, float* col_sums, Wide wide8,
                                                        One one) {
  const int64_t wide = cols / 8 * 8;
  std::vector<float> block(col_sums ? static_cast<size_t>(cols) : 0, 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t o = r * cols;
    for (int64_t j = 0; j < wide; j += 8) {
      const __m256 d = wide8(o + j);
      if (col_sums) _mm256_storeu_ps(&block[j], _mm256_add_ps(_mm256_loadu_ps(&block[j]), d));
    }
    for (int64_t j = wide; j < cols; ++j) {
      const float d = one(o + j);
      if (col_sums) block[j] += d;
    }
    if (col_sums && ((r + 1) % kSumRows == 0 || r + 1 == rows)) {
      for (int64_t j = 0; j < cols; ++j) {
        col_sums[j] += block[j];
        block[j] = 0.0f;
      }
    }
  }
}

__attribute__((target("avx2,fma"))) void multiply_rows_avx2(const float* g, const float* d, float* dx, int64_t rows,
                                                             int64_t cols, float* col_sums) {
  rows_with_sums(
      rows, cols, col_sums,
      [&](int64_t i) __attribute__((target("avx2,fma"))) {
        const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(g + i), _mm256_loadu_ps(d + i));
        _mm256_storeu_ps(dx + i, v);
        return v;
      },
      [&](int64_t i) { return dx[i] = g[i] * d[i]; });
}

__attribute__((target("avx2,fma"))) void column_sums_avx2(const float* a, int64_t rows, int64_t cols, float* col_sums) {
  rows_with_sums(
      rows, cols, col_sums, [&](int64_t i) __attribute__((target("avx2,fma"))) { return _mm256_loadu_ps(a + i); },
      [&](int64_t i) { return a[i]; });
}

// The largest of 8 floats, and their sum in double.
__attribute__((target("avx2,fma"))) float max8(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_max_ss(m, _mm_shuffle_ps(m, m, 1)));
}

__attribute__((target("avx2,fma"))) double sum4d(__m256d v) {
  const __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
  return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

// softmax_row's work; false (y untouched) when x holds a NaN or an infinity. The exponentials are summed
// in double (8,192 of them in float lanes would carry ~1e-6 into the loss).
__attribute__((target("avx2,fma"))) bool softmax_avx2(const float* x, float* y, int64_t n, double* log_norm) {
  const int64_t wide = n / 8 * 8;
  __m256 mx = _mm256_set1_ps(-INFINITY), bad = _mm256_setzero_ps();
  for (int64_t i = 0; i < wide; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    mx = _mm256_max_ps(mx, v);
    const __m256 d = _mm256_sub_ps(v, v);  // NaN for a NaN or an infinity (max_ps may drop a NaN)
    bad = _mm256_or_ps(bad, _mm256_cmp_ps(d, d, _CMP_UNORD_Q));
  }
  float m = max8(mx);
  bool finite = _mm256_movemask_ps(bad) == 0;
  for (int64_t i = wide; i < n; ++i) {
    m = std::max(m, x[i]);
    finite = finite && std::isfinite(x[i]);
  }
  if (!finite) return false;
  const __m256 vm = _mm256_set1_ps(m);
  __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
  for (int64_t i = 0; i < wide; i += 8) {
    const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
    _mm256_storeu_ps(y + i, e);
    lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
    hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
  }
  double sum = sum4d(_mm256_add_pd(lo, hi));
  for (int64_t i = wide; i < n; ++i) sum += y[i] = std::exp(x[i] - m);
  const __m256 inv = _mm256_set1_ps(static_cast<float>(1.0 / sum));
  for (int64_t i = 0; i < wide; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(y + i), inv));
  for (int64_t i = wide; i < n; ++i) y[i] *= _mm256_cvtss_f32(inv);
  *log_norm = static_cast<double>(m) + std::log(sum);
  return true;
}

__attribute__((target("avx2,fma"))) void softmax_backward_avx2(const float* p, const float* dp, float* ds, int64_t n) {
  const int64_t wide = n / 8 * 8;
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < wide; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(p + i), _mm256_loadu_ps(dp + i), acc);
  const __m128 h = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
  float dot = _mm_cvtss_f32(_mm_hadd_ps(_mm_hadd_ps(h, h), _mm_hadd_ps(h, h)));
  for (int64_t i = wide; i < n; ++i) dot += p[i] * dp[i];
  const __m256 vd = _mm256_set1_ps(dot);
  for (int64_t i = 0; i < wide; i += 8) {
    _mm256_storeu_ps(ds + i, _mm256_mul_ps(_mm256_loadu_ps(p + i), _mm256_sub_ps(_mm256_loadu_ps(dp + i), vd)));
  }
  for (int64_t i = wide; i < n; ++i) ds[i] = p[i] * (dp[i] - dot);
}

}  // namespace

bool simd_loops() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return yes;
}

bool gelu_forward(const float* x, float* y, float* d, int64_t n) {
  if (!simd_loops()) return false;
  gelu_forward_avx2(x, y, d, n);
  return true;
}

bool multiply_rows(const float* g, const float* d, float* dx, int64_t rows, int64_t cols, float* col_sums) {
  if (!simd_loops()) return false;
  multiply_rows_avx2(g, d, dx, rows, cols, col_sums);
  return true;
}

bool add_column_sums(const float* a, int64_t rows, int64_t cols, float* col_sums) {
  if (!simd_loops()) return false;
  column_sums_avx2(a, rows, cols, col_sums);
  return true;
}

bool softmax_row(const float* x, float* y, int64_t n, double* log_norm) {
  return simd_loops() && softmax_avx2(x, y, n, log_norm);
}

bool softmax_backward_row(const float* p, const float* dp, float* ds, int64_t n) {
  if (!simd_loops()) return false;
  softmax_backward_avx2(p, dp, ds, n);
  return true;
}

}  // namespace lm::model::kernels

#else  // not x86: no AVX2, the callers take LibTorch's ops

namespace lm::model::kernels {

bool simd_loops() { return false; }
bool gelu_forward(const float*, float*, float*, int64_t) { return false; }
bool multiply_rows(const float*, const float*, float*, int64_t, int64_t, float*) { return false; }
bool add_column_sums(const float*, int64_t, int64_t, float*) { return false; }
bool softmax_row(const float*, float*, int64_t, double*) { return false; }
bool softmax_backward_row(const float*, const float*, float*, int64_t) { return false; }

}  // namespace lm::model::kernels

#endif
