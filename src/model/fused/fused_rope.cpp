// kernels::prepare_qk: q and k of a fused projection made ready for the scores (qk_norm's RMS scaling, then
// rope's rotation) in one pass over the rows, and its gradient in one pass back, instead of the reference
// set's chain of tensor ops (views, squares, means, narrows, concatenations, a stack) and their autograd nodes.
// The rows' loops are simd.h's (qk_rows, qk_rows_backward).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include "model/fused/kernels.h"
#include "model/fused/simd.h"

namespace lm::model::kernels {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr float kQkEps = 1e-6f;  // as Ops::prepare_qk

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
      qk_rows(in, o, f, c, s, begin, end - begin, T, H, D, norm, kQkEps);
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
      qk_rows_backward(gp, in, f, d, c, s, begin, end - begin, T, H, D, norm);
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
