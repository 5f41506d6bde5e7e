#include "model/kernels.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <atomic>

namespace lm::model::kernels {

namespace {

std::atomic<Mode> g_mode{Mode::kPlain};

// Below this many multiply-adds a split costs more in start-up than it saves.
constexpr int64_t kMinSplitWork = int64_t{1} << 18;

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// y = x2 W^T + b for x2 (N,in), b undefined for none; the products through mm_into.
at::Tensor linear_forward(AutogradContext* ctx, const at::Tensor& x2, const at::Tensor& w,
                             const at::Tensor& b) {
  ctx->save_for_backward({x2, w});
  at::Tensor out = at::empty({x2.size(0), w.size(0)}, x2.options());
  if (b.defined()) out.copy_(b.expand_as(out));
  mm_into(out, x2, w.t(), /*accumulate=*/b.defined());
  return out;
}

// {dx, dw, db}; db only when `bias`. Only the gradients autograd asks for are computed.
variable_list linear_backward(AutogradContext* ctx, const at::Tensor& grad, bool bias) {
  const auto saved = ctx->get_saved_variables();
  const at::Tensor& x2 = saved[0];
  const at::Tensor& w = saved[1];
  const at::Tensor g = grad.contiguous();  // (N,out)
  at::Tensor dx, dw, db;
  if (ctx->needs_input_grad(0)) {
    dx = at::empty_like(x2);
    mm_into(dx, g, w);  // (N,out) @ (out,in)
  }
  if (ctx->needs_input_grad(1)) {
    dw = at::empty_like(w);
    mm_into(dw, g.t(), x2);  // (out,N) @ (N,in)
  }
  if (!bias) return {dx, dw};
  if (ctx->needs_input_grad(2)) db = g.sum(0);
  return {dx, dw, db};
}

struct LinearFn : public torch::autograd::Function<LinearFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x2, const at::Tensor& w,
                               const at::Tensor& b) {
    return linear_forward(ctx, x2, w, b);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) { return linear_backward(ctx, grads[0], true); }
};

// Autograd takes no undefined input, so a layer without bias has its own function.
struct LinearNoBiasFn : public torch::autograd::Function<LinearNoBiasFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x2, const at::Tensor& w) {
    return linear_forward(ctx, x2, w, at::Tensor());
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) { return linear_backward(ctx, grads[0], false); }
};

}  // namespace

void set_mode(Mode m) { g_mode.store(m); }
Mode mode() { return g_mode.load(); }

bool applies(const at::Tensor& x) {
  return mode() == Mode::kFused && x.device().is_cpu() && x.scalar_type() == at::kFloat;
}

void mm_into(at::Tensor& out, const at::Tensor& a, const at::Tensor& b, bool accumulate) {
  auto one = [accumulate](at::Tensor o, const at::Tensor& x, const at::Tensor& y) {
    if (accumulate) {
      o.addmm_(x, y);
    } else {
      at::mm_out(o, x, y);
    }
  };
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  const int64_t threads = at::get_num_threads();
  if (threads < 2 || at::in_parallel_region() || M * N * K < kMinSplitWork) return one(out, a, b);
  // Rows in multiples of 8 and columns in multiples of 16 keep every block on OpenBLAS's kernel tiles.
  const bool by_rows = M >= N;
  const int64_t len = by_rows ? M : N, align = by_rows ? 8 : 16;
  const int64_t parts = std::min(threads, std::max<int64_t>(1, len / align));
  const int64_t size = ((len + parts - 1) / parts + align - 1) / align * align;
  at::parallel_for(0, parts, 1, [&](int64_t begin, int64_t end) {
    const c10::AutoGradMode no_autograd(false);  // thread-local: off on the pool's threads too
    for (int64_t p = begin; p < end; ++p) {
      const int64_t lo = std::min(len, p * size), n = std::min(len, lo + size) - lo;
      if (n == 0) continue;
      if (by_rows) {
        one(out.narrow(0, lo, n), a.narrow(0, lo, n), b);
      } else {
        one(out.narrow(1, lo, n), a, b.narrow(1, lo, n));
      }
    }
  });
}

at::Tensor mm(const at::Tensor& a, const at::Tensor& b) {
  at::Tensor out = at::empty({a.size(0), b.size(1)}, a.options());
  mm_into(out, a, b);
  return out;
}

at::Tensor linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  auto sizes = x.sizes().vec();
  sizes.back() = weight.size(0);
  const at::Tensor x2 = x.reshape({-1, x.size(-1)});
  return (bias.defined() ? LinearFn::apply(x2, weight, bias) : LinearNoBiasFn::apply(x2, weight)).view(sizes);
}

}  // namespace lm::model::kernels
