// The fused CPU training kernels (the fused set of the model's operations, fused_ops.h): every matrix product of a training step split into
// one block of rows per LibTorch thread, sized by the threads' measured speeds (balance.h), each block one
// single-threaded OpenBLAS call on its own core, and the work around the products fused per block (the
// head's softmax and loss, the attention of one head). One thread pool (LibTorch's OpenMP) serves the products and the elementwise
// ops, so no second pool spins against it.
//
// Why: on this class of machine OpenBLAS's own 2-thread products reach 80-140 GFLOP/s on the model's
// shapes (2048x256 @ 256x768 ...), while two independent single-threaded products of the halves reach
// 150-165, about the 2048x2048 ceiling (scripts/bench.sh; docs/BENCHMARKS.md).
//
// The reference set (model/ops.h: LibTorch's own ops, OpenBLAS's own threads) stays: every model outside
// training uses it, and tests compare the two (same losses to 1e-4 over 20 steps, same gradients to 1e-5).
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <vector>

#include "model/fused/balance.h"
#include "model/gpt_config.h"

namespace lm::model::kernels {

using balance::Scheduler;
using balance::SchedulerPtr;

/// Every function below takes the scheduler of the fused set that calls it (balance.h: the threads' measured
/// speeds, which cut each product's rows); those with autograd keep it for their backward products.
///
/// out (M,N) = alpha a (M,K) @ b (K,N), or out += alpha a @ b when `accumulate`, its rows split over
/// LibTorch's threads; with bf16 a and b (out fp32) the whole product on oneDNN's threads (bf16_products.h).
/// Any operand may be a transposed or narrowed view whose rows or columns are contiguous. No autograd.
void mm_into(Scheduler& scheduler, at::Tensor& out, const at::Tensor& a, const at::Tensor& b, bool accumulate = false,
             double alpha = 1.0);
at::Tensor mm(Scheduler& scheduler, const at::Tensor& a, const at::Tensor& b);

/// out = a @ b (or out += a @ b) for each; independent products run at the same time: their rows laid end
/// to end and cut into one run per thread (with two threads and two products of equal work on threads of
/// equal speed, one whole product per thread). The bits do not depend on the threads' speeds. With bf16 a
/// and b (out fp32): each product whole on oneDNN's threads (bf16_products.h), then `after` over its rows.
struct Product {
  at::Tensor out, a, b;
  bool accumulate = false;
  double alpha = 1.0;  ///< the product's scale (BLAS alpha: no extra pass)
  /// Run by the thread that made a block of `out`'s rows [lo, lo + n), right after it (while the block is
  /// fresh in cache).
  std::function<void(int64_t lo, int64_t n)> after = nullptr;
};
void mm_all(Scheduler& scheduler, const std::vector<Product>& products);

/// A weight's bf16 copy as an autograd input: the copy, or an empty tensor for none (fp32 products; autograd
/// takes no undefined input). For the kernels' autograd functions.
at::Tensor copy_or_empty(const at::Tensor& weight_bf16, const at::Tensor& weight);

/// The scheduler as the kernels' autograd functions take it and keep it for backward: an IValue (a capsule,
/// since autograd's context keeps IValues), and the scheduler such a value holds.
c10::IValue scheduler_value(const SchedulerPtr& scheduler);
Scheduler& scheduler_of(const c10::IValue& value);

/// With bf16 products (the functions below that take `weight_bf16`): pass the weight's bf16 copy (model/
/// weight_copies.h); the products then read it and the activations cast once to bf16, accumulate in fp32 and
/// return fp32 (bf16_products.h), and the gradients of the fp32 weights are fp32. Undefined: fp32 products.
///
/// x (..., in) W^T + b with autograd (b may be undefined); products through mm_into.
at::Tensor linear(const SchedulerPtr& scheduler, const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                  const at::Tensor& weight_bf16 = {});

/// act(x W^T + b) for x (..., in) with autograd, act the erf GELU (as torch::gelu(linear(x, weight, bias)))
/// or relu(.)^2 (`act`): each thread applies the activation to its block of the product as soon as
/// the block is made, with its derivative when a gradient is wanted (kept for backward), and backward
/// multiplies by that derivative and takes its share of the bias gradient in one pass per block. `bias`
/// may be undefined (model.bias false).
at::Tensor linear_act(const SchedulerPtr& scheduler, const at::Tensor& x, const at::Tensor& weight,
                      const at::Tensor& bias, MlpActivation act, const at::Tensor& weight_bf16 = {});

/// Ops::prepare_qk of qkv (B,T,3C) with autograd: each head's q and k scaled to unit RMS (qk_norm), then
/// rotated by cos, sin (T, D/2) (undefined: no rotation), v copied; one pass over the rows per direction.
at::Tensor prepare_qk(const at::Tensor& qkv, int64_t heads, bool qk_norm, const at::Tensor& cos, const at::Tensor& sin);

/// Mean cross-entropy of hidden (B,T,C) or (N,C) @ weight^T (V,C), soft-capped to softcap tanh(. / softcap)
/// when softcap > 0, against targets, as chunked_next_token_loss, in one pass per row block: the logits of
/// each block live only in a reused buffer, and when a gradient is wanted it is computed right there
/// ((softmax - one-hot), times the cap's slope 1 - tanh^2) and kept for backward, so no logits,
/// log-probabilities or their gradients are ever stored.
at::Tensor next_token_loss(const SchedulerPtr& scheduler, const at::Tensor& hidden, const at::Tensor& weight,
                           const at::Tensor& targets, double softcap = 0.0, const at::Tensor& weight_bf16 = {});

/// The rows of `table` (V,C) at `ids` (any shape) with autograd, as at::embedding. Its gradient is sparse
/// (the ids and their rows, as nn.Embedding(sparse=True)): for a table tied to the head of next_token_loss,
/// autograd adds it to the head's dense gradient of the table in the same backward pass (no dense V x C
/// gradient of the lookup exists); with no head gradient in the pass the table's .grad is sparse.
at::Tensor embedding(const at::Tensor& table, const at::Tensor& ids);

/// Causal self-attention of a fused projection: qkv (B,T,3C) holding q | k | v, H heads -> (B,T,C), each
/// (sequence, head) pair scored, masked, softmaxed and applied on one thread with autograd. Same value as
/// attention_reference on the split heads.
at::Tensor causal_attention(const at::Tensor& qkv, int64_t heads);

}  // namespace lm::model::kernels
