// Loops of the fused CPU path in AVX2 + FMA: the erf GELU with its derivative, and the backward's product
// with that derivative (the column sums of the result taken in the same pass), for the MLP's fc layer
// (kernels::linear_gelu); column sums (the bias gradients of the other linear layers); the softmax and its
// backward by rows (the loss head, the attention weights). Each returns false, having done nothing, on a
// CPU without AVX2 or FMA, and the caller then takes LibTorch's ops.
#pragma once

#include <cstdint>

namespace lm::model::kernels {

/// True when this CPU runs the loops below (x86 with AVX2 and FMA).
bool simd_loops();

/// y = GELU(x) = x Phi(x) for `n` contiguous floats, Phi(x) = (1 + erf(x / sqrt 2)) / 2 by Abramowitz-Stegun
/// 7.1.26 (|error| <= 1.5e-7; LibTorch's gelu uses the erf formula). When `d` is not null it also gets the
/// derivative GELU'(x) = Phi(x) + x phi(x) (as LibTorch's gelu_backward), from the same Phi and the same
/// exp(-x^2/2), which gives phi: kept by the forward pass, so the backward pass evaluates no erf. `d` may
/// be `x` (each element is read before it is written); `y` may not.
bool gelu_forward(const float* x, float* y, float* d, int64_t n);

/// dx = g * d elementwise for `rows` x `cols` row-major floats (a GELU's backward from its kept derivative).
/// When `col_sums` is not null, adds each column's sum of dx to it (summed in blocks of 64 rows, then added).
bool multiply_rows(const float* g, const float* d, float* dx, int64_t rows, int64_t cols, float* col_sums);

/// Adds each column's sum of `rows` x `cols` row-major floats to col_sums (summed in blocks of 64 rows).
bool add_column_sums(const float* a, int64_t rows, int64_t cols, float* col_sums);

/// y = softmax(x) over `n` floats (y may be x), exp by the same Cephes polynomial as the GELU's (a few ulp
/// of expf; an exponent under -87.3 gives ~1e-38, not 0); `log_norm` gets the row's log-normaliser
/// max + log(sum exp(x - max)), so -log p_i = log_norm - x_i without p_i's underflow. Returns false, having
/// written nothing, also when x holds a NaN or an infinity (LibTorch's softmax then says what they give).
bool softmax_row(const float* x, float* y, int64_t n, double* log_norm);

/// ds = p (dp - sum(p dp)) over `n` floats: the softmax's backward for weights p and their gradient dp.
bool softmax_backward_row(const float* p, const float* dp, float* ds, int64_t n);

}  // namespace lm::model::kernels
