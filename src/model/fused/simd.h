// Loops of the fused CPU path in AVX-512 where the CPU has it, else AVX2 + FMA: the erf GELU and relu^2
// with their derivatives, and the backward's product with that derivative (the column sums of the result
// taken in the same pass), for the MLP's fc layer (kernels::linear_act); QK-norm and the rotary rotation of
// q and k, and their gradient (kernels::prepare_qk); column sums (the bias gradients of the other linear
// layers); the softmax and its backward by rows (the loss head, the attention weights); and the small
// products of one attention head (AVX2 + FMA only: the vector width of the OpenBLAS kernels the
// benchmark's ceiling runs, OPENBLAS_CORETYPE=Haswell here). The fused set is refused on a CPU without AVX2
// and FMA (model/make_ops.cpp), so the loops have no fallback: called there, each throws.
#pragma once

#include <cstdint>

namespace lm::model::kernels {

/// True when this CPU runs the loops below (x86 with AVX2 and FMA).
bool simd_loops();

/// Floats per vector in the loops below: 16 (AVX-512F), 8 (AVX2 + FMA) or 0 (neither: the loops throw).
/// Elementwise results have the same bits at 8 and 16 but for the last n mod 16 elements
/// (scalar loops at 16, vectors at 8); sums across a row may differ in the last bits.
int simd_lanes();

/// For tests: at most `lanes` floats per vector from now on (8 runs the AVX2 loops on an AVX-512 CPU; 16 lifts
/// the cap; below 8 counts as 8). Process-wide.
void cap_simd_lanes(int lanes);

/// y = GELU(x) = x Phi(x) for `n` contiguous floats, Phi(x) = (1 + erf(x / sqrt 2)) / 2 by Abramowitz-Stegun
/// 7.1.26 (|error| <= 1.5e-7; LibTorch's gelu uses the erf formula). When `d` is not null it also gets the
/// derivative GELU'(x) = Phi(x) + x phi(x) (as LibTorch's gelu_backward), from the same Phi and the same
/// exp(-x^2/2), which gives phi: kept by the forward pass, so the backward pass evaluates no erf. `d` may
/// be `x` (each element is read before it is written); `y` may not.
void gelu_forward(const float* x, float* y, float* d, int64_t n);

/// y = relu(x)^2 for `n` contiguous floats and, when `d` is not null, d = 2 relu(x) (its derivative, kept by
/// the forward pass); a NaN gives 0. `d` may be `x`; `y` may not. The same bits at every width.
void relu2_forward(const float* x, float* y, float* d, int64_t n);

/// dx = g * d elementwise for `rows` x `cols` row-major floats (a GELU's backward from its kept derivative).
/// When `col_sums` is not null, adds each column's sum of dx to it (summed in blocks of 64 rows, then added).
void multiply_rows(const float* g, const float* d, float* dx, int64_t rows, int64_t cols, float* col_sums);

/// Adds each column's sum of `rows` x `cols` row-major floats to col_sums (summed in blocks of 64 rows).
void add_column_sums(const float* a, int64_t rows, int64_t cols, float* col_sums);

/// y = softmax(x) over `n` floats (y may be x), exp by the same Cephes polynomial as the GELU's (a few ulp
/// of expf; an exponent under -87.3 gives ~1e-38, not 0); `log_norm` gets the row's log-normaliser
/// max + log(sum exp(x - max)), so -log p_i = log_norm - x_i without p_i's underflow. Returns false, having
/// written nothing, when x holds a NaN or an infinity (LibTorch's softmax then says what they give).
bool softmax_row(const float* x, float* y, int64_t n, double* log_norm);

/// ds = p (dp - sum(p dp)) over `n` floats: the softmax's backward for weights p and their gradient dp.
void softmax_backward_row(const float* p, const float* dp, float* ds, int64_t n);

/// kernels::prepare_qk's forward over rows [first, first + rows) of a fused projection `in` ((N, 3C) floats,
/// C = H D, T positions per sequence): each of q's and k's 2H heads (D floats) scaled to unit RMS when `norm`
/// (r = (mean(x^2) + eps)^(-1/2), written to factors[n 2H + head]; else 1), then, when c is not null, rotated
/// by c, s ((T, D/2) each, the row's position n mod T): rotate-half, out_i = a c_i - b s_i,
/// out_{i+D/2} = b c_i + a s_i. v is copied as it is.
void qk_rows(const float* in, float* out, float* factors, const float* c, const float* s, int64_t first, int64_t rows,
             int64_t T, int64_t H, int64_t D, bool norm, float eps);

/// qk_rows' gradient: g (the output's gradient, same layout) -> dx, from `in` and the kept factors.
void qk_rows_backward(const float* g, const float* in, const float* factors, float* dx, const float* c, const float* s,
                      int64_t first, int64_t rows, int64_t T, int64_t H, int64_t D, bool norm);

/// Rows of c that small_gemm computes together (a block of rows, in registers).
constexpr int64_t kSmallGemmRows = 6;

/// The part of a square T x T product (rows and columns, or rows and k, both positions in one sequence) that a
/// causal attention head needs, for small_gemm. Blocks of kSmallGemmRows rows of c, rows [i, e):
/// - kColumns: only columns [0, e) are computed and written (row r needs columns up to r); the columns
///   after e are left as they were;
/// - kInnerTo: the sum runs over k in [0, e): op(a)'s entries (r, k) for r < k < e must be zero (a causal
///   softmax's weights or their gradient, zero after each row's keys), those from e on are never read;
/// - kInnerFrom: the sum runs over k in [i, K): op(a)'s entries (r, k) for i <= k < r must be zero (those
///   weights read transposed), those before i are never read.
/// Where the skipped entries are zero too (and b finite there: 0 x inf is NaN), each result has the bits of
/// the whole product's (kAll): a zero adds nothing.
enum class Causal { kAll, kColumns, kInnerTo, kInnerFrom };

/// c = alpha op(a) b + beta c on the calling thread, for the small products of one attention head (sizes up
/// to a few hundred): c is M x N (rows ldc apart), b is K x N (rows ldb apart), op(a) is M x K: a itself (rows
/// lda apart) or, when `ta`, the transpose of a K x M matrix (rows lda apart); `part` limits the work to a
/// causal triangle (above). beta 0 ignores c's old contents. Blocks of kSmallGemmRows rows x 16 columns are
/// summed in registers over their range of K (k in order, one FMA each), so each result has the same bits
/// whatever M, N and the block it falls in; neither operand is copied. (OpenBLAS copies both into its own
/// layout and zeroes c first on every call, which at these sizes costs about half as much as the product
/// itself.)
void small_gemm(int64_t M, int64_t N, int64_t K, float alpha, const float* a, int64_t lda, bool ta, const float* b,
                int64_t ldb, float beta, float* c, int64_t ldc, Causal part = Causal::kAll);

/// dst (cols x rows, rows ldd apart) = the transpose of src (rows x cols, rows lds apart), 8 x 8 blocks at a time.
void transpose(const float* src, int64_t rows, int64_t cols, int64_t lds, float* dst, int64_t ldd);

}  // namespace lm::model::kernels
