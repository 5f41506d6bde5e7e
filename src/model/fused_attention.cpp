// kernels::causal_attention: one (sequence, head) pair at a time per thread, straight from the fused qkv
// projection's layout to the output's, with no transposed copies.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cmath>
#include <limits>

#include "model/kernels.h"

namespace lm::model::kernels {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The (T,D) block of head h in part `which` (0 q, 1 k, 2 v) of one sequence's qkv rows (T,3C).
at::Tensor head_of(const at::Tensor& rows, int64_t which, int64_t h, int64_t C, int64_t D) {
  return rows.narrow(1, which * C + h * D, D);
}

struct AttentionFn : public torch::autograd::Function<AttentionFn> {
  // qkv (B,T,3C) contiguous -> y (B,T,C); keeps the attention weights P (B,H,T,T) for backward.
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& qkv, int64_t H) {
    const int64_t B = qkv.size(0), T = qkv.size(1), C = qkv.size(2) / 3, D = C / H;
    const double scale = 1.0 / std::sqrt(static_cast<double>(D));
    const at::Tensor future = at::ones({T, T}, qkv.options().dtype(at::kBool)).triu(1);
    at::Tensor p = at::empty({B, H, T, T}, qkv.options());
    at::Tensor y = at::empty({B, T, C}, qkv.options());
    at::parallel_for(0, B * H, 1, [&](int64_t begin, int64_t end) {
      const c10::AutoGradMode no_autograd(false);  // thread-local: off on the pool's threads too
      at::Tensor scores = at::empty({T, T}, qkv.options());
      for (int64_t i = begin; i < end; ++i) {
        const int64_t b = i / H, h = i % H;
        const at::Tensor rows = qkv.select(0, b);
        at::mm_out(scores, head_of(rows, 0, h, C, D), head_of(rows, 1, h, C, D).t());
        scores.mul_(scale).masked_fill_(future, -std::numeric_limits<float>::infinity());
        at::Tensor pi = p.select(0, b).select(0, h);
        at::_softmax_out(pi, scores, 1, false);
        at::Tensor yi = y.select(0, b).narrow(1, h * D, D);
        at::mm_out(yi, pi, head_of(rows, 2, h, C, D));
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
    const int64_t B = qkv.size(0), T = qkv.size(1), C = qkv.size(2) / 3, D = C / H;
    const double scale = 1.0 / std::sqrt(static_cast<double>(D));
    const at::Tensor dy = grads[0].contiguous();  // (B,T,C)
    at::Tensor dqkv = at::empty_like(qkv);
    at::parallel_for(0, B * H, 1, [&](int64_t begin, int64_t end) {
      const c10::AutoGradMode no_autograd(false);  // thread-local: off on the pool's threads too
      at::Tensor dp = at::empty({T, T}, qkv.options());
      for (int64_t i = begin; i < end; ++i) {
        const int64_t b = i / H, h = i % H;
        const at::Tensor rows = qkv.select(0, b), pi = p.select(0, b).select(0, h);
        const at::Tensor dyi = dy.select(0, b).narrow(1, h * D, D);  // (T,D)
        at::Tensor drows = dqkv.select(0, b);
        at::Tensor dq = head_of(drows, 0, h, C, D), dk = head_of(drows, 1, h, C, D), dv = head_of(drows, 2, h, C, D);
        at::mm_out(dp, dyi, head_of(rows, 2, h, C, D).t());  // dP = dY V^T
        at::mm_out(dv, pi.t(), dyi);                          // dV = P^T dY
        at::Tensor ds = at::_softmax_backward_data(dp, pi, 1, at::kFloat).mul_(scale);  // masked: P = 0
        at::mm_out(dq, ds, head_of(rows, 1, h, C, D));       // dQ = dS K
        at::mm_out(dk, ds.t(), head_of(rows, 0, h, C, D));   // dK = dS^T Q
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
