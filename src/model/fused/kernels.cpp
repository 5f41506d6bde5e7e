#include "model/fused/kernels.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <atomic>

#include "model/fused/balance.h"
#include "model/fused/bf16_products.h"
#include "model/fused/simd.h"

namespace lm::model::kernels {

namespace {

// Below this many multiply-adds a split costs more in start-up than it saves.
constexpr int64_t kMinSplitWork = int64_t{1} << 18;

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The operand a product reads for x (N,in) fp32: x itself, or with bf16 products (`wb`, the weight's bf16 copy,
// not empty) x cast once, here, where the first product reads it; backward's weight product reads it again.
at::Tensor operand(const at::Tensor& x, const at::Tensor& wb) { return wb.numel() > 0 ? x.to(at::kBFloat16) : x; }

// y = x2 W^T + b for x2 (N,in), b undefined for none, W's bf16 copy `wb` (empty: fp32 products); the
// products through mm_into. Keeps the operands backward multiplies by: x2 and W, or their bf16 copies.
// `scheduler` (scheduler_value) is kept for backward.
at::Tensor linear_forward(AutogradContext* ctx, const at::Tensor& x2, const at::Tensor& w, const at::Tensor& b,
                          const at::Tensor& wb, const c10::IValue& scheduler) {
  const at::Tensor x = operand(x2, wb), wt = wb.numel() > 0 ? wb : w;
  ctx->save_for_backward({x, wt});
  ctx->saved_data["scheduler"] = scheduler;
  at::Tensor out = at::empty({x2.size(0), w.size(0)}, x2.options());
  if (b.defined()) out.copy_(b.expand_as(out));
  mm_into(scheduler_of(scheduler), out, x, wt.t(), /*accumulate=*/b.defined());
  return out;
}

// {dx, dw} of y = x2 W^T from g = dL/dy (N,out) contiguous fp32, x2 and w as the forward kept them (fp32, or
// bf16 copies: g is then cast once for both products), the two products at once (equal halves of the work);
// only the gradients autograd asks for are computed, in fp32.
variable_list linear_products(AutogradContext* ctx, const at::Tensor& g, const at::Tensor& x2, const at::Tensor& w) {
  at::Tensor dx, dw;
  const at::Tensor gx = g.to(w.scalar_type());
  const auto fp32 = g.options();
  std::vector<Product> products;
  if (ctx->needs_input_grad(0)) {
    dx = at::empty(x2.sizes(), fp32);
    products.push_back({dx, gx, w});  // (N,out) @ (out,in)
  }
  if (ctx->needs_input_grad(1)) {
    dw = at::empty(w.sizes(), fp32);
    products.push_back({dw, gx.t(), x2});  // (out,N) @ (N,in)
  }
  mm_all(scheduler_of(ctx->saved_data["scheduler"]), products);
  return {dx, dw};
}

// body(begin, end, share) for a range of rows [begin, end) of `rows` per thread, `share` that thread's own
// zeroed row of `cols` column sums; returns the shares added. grad mode is off on every thread.
template <typename Body>
at::Tensor rows_with_shares(int64_t rows, int64_t cols, const at::TensorOptions& options, const Body& body) {
  at::Tensor shares = at::zeros({at::get_num_threads(), cols}, options);
  at::parallel_for(0, rows, /*grain_size=*/8, [&](int64_t begin, int64_t end) {
    const c10::AutoGradMode no_autograd(false);  // thread-local: off on the pool's threads too
    body(begin, end, shares.select(0, at::get_thread_num()));
  });
  return shares.sum(0);
}

// The column sums of g (N,out) contiguous (a bias gradient), each thread summing its rows (simd.h).
at::Tensor column_sums(const at::Tensor& g) {
  const int64_t cols = g.size(1);
  return rows_with_shares(g.size(0), cols, g.options(), [&](int64_t begin, int64_t end, at::Tensor share) {
    add_column_sums(g.data_ptr<float>() + begin * cols, end - begin, cols, share.data_ptr<float>());
  });
}

// {dx, dw, db, d wb, scheduler}: db only when `bias`; wb (the bf16 copy, an input only to be read) and the
// scheduler get none.
variable_list linear_backward(AutogradContext* ctx, const at::Tensor& grad, bool bias) {
  const auto saved = ctx->get_saved_variables();
  const at::Tensor g = grad.contiguous();  // (N,out)
  variable_list out = linear_products(ctx, g, saved[0], saved[1]);
  if (bias) out.push_back(ctx->needs_input_grad(2) ? column_sums(g) : at::Tensor());
  out.push_back(at::Tensor());
  out.push_back(at::Tensor());
  return out;
}

struct LinearFn : public torch::autograd::Function<LinearFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x2, const at::Tensor& w, const at::Tensor& b,
                            const at::Tensor& wb, const c10::IValue& scheduler) {
    return linear_forward(ctx, x2, w, b, wb, scheduler);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) { return linear_backward(ctx, grads[0], true); }
};

// Autograd takes no undefined input, so a layer without bias has its own function.
struct LinearNoBiasFn : public torch::autograd::Function<LinearNoBiasFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x2, const at::Tensor& w, const at::Tensor& wb,
                            const c10::IValue& scheduler) {
    return linear_forward(ctx, x2, w, at::Tensor(), wb, scheduler);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) { return linear_backward(ctx, grads[0], false); }
};

// act(x2 W^T + b) for x2 (N,in), b empty for a layer without bias (autograd takes no undefined input), act the
// MlpActivation whose value act_value is, wb W's bf16 copy (empty: fp32 products). When `grad`, keeps x2 and W
// (or their bf16 copies), the scheduler, and the activation's derivative at the pre-activation, written over
// the pre-activation's own buffer (the GELU's by simd.h, from the same erf; relu^2's, 2 relu(x)).
struct LinearActFn : public torch::autograd::Function<LinearActFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x2, const at::Tensor& w, const at::Tensor& b,
                            const at::Tensor& wb, int64_t act_value, bool grad, const c10::IValue& scheduler) {
    const auto act_kind = static_cast<MlpActivation>(act_value);
    at::Tensor pre = at::empty({x2.size(0), w.size(0)}, x2.options());
    at::Tensor act = at::empty_like(pre);
    const bool bias = b.numel() > 0;
    if (bias) pre.copy_(b.expand_as(pre));
    auto act_block = [&](int64_t lo, int64_t n) {
      const int64_t cols = pre.size(1), o = lo * cols;  // a block of rows is contiguous
      float* p = pre.data_ptr<float>() + o;
      float* y = act.data_ptr<float>() + o;
      if (act_kind == MlpActivation::kRelu2) {
        relu2_forward(p, y, grad ? p : nullptr, n * cols);  // relu^2, and 2 relu(x) over the pre-activation
      } else {
        gelu_forward(p, y, grad ? p : nullptr, n * cols);
      }
    };
    const at::Tensor x = operand(x2, wb), wt = wb.numel() > 0 ? wb : w;
    mm_all(scheduler_of(scheduler), {{pre, x, wt.t(), /*accumulate=*/bias, 1.0, act_block}});
    if (grad) ctx->save_for_backward({x, wt, pre});  // pre: the derivative
    ctx->saved_data["scheduler"] = scheduler;
    ctx->saved_data["bias"] = bias;
    return act;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& x2 = saved[0];
    const at::Tensor& w = saved[1];
    const at::Tensor& kept = saved[2];  // the activation's derivative
    const at::Tensor g = grads[0].contiguous();  // (N,out): the gradient of the activation
    // The pre-activation's gradient, a range of rows per thread, each range's column sums (the thread's
    // share of the bias gradient, when wanted) taken in the same pass (simd.h).
    at::Tensor dpre = at::empty_like(g);
    const int64_t cols = g.size(1);
    const bool want_bias = ctx->saved_data["bias"].toBool() && ctx->needs_input_grad(2);
    at::Tensor db = rows_with_shares(g.size(0), cols, g.options(), [&](int64_t begin, int64_t end, at::Tensor share) {
      const int64_t off = begin * cols;
      multiply_rows(g.data_ptr<float>() + off, kept.data_ptr<float>() + off, dpre.data_ptr<float>() + off,
                    end - begin, cols, want_bias ? share.data_ptr<float>() : nullptr);
    });
    variable_list out = linear_products(ctx, dpre, x2, w);
    out.push_back(want_bias ? db : at::Tensor());
    out.push_back(at::Tensor());  // wb: read only
    out.push_back(at::Tensor());  // act_value: not a tensor
    out.push_back(at::Tensor());  // grad: not a tensor
    out.push_back(at::Tensor());  // the scheduler: not a tensor
    return out;
  }
};

}  // namespace

void mm_into(Scheduler& scheduler, at::Tensor& out, const at::Tensor& a, const at::Tensor& b, bool accumulate,
             double alpha) {
  std::vector<Product> one{{out, a, b, accumulate, alpha}};
  mm_all(scheduler, one);
}

void mm_all(Scheduler& scheduler, const std::vector<Product>& products) {
  const int64_t threads = at::get_num_threads();
  // The products' rows end to end, cut into one run of pieces per thread by the threads' measured speeds
  // (balance.h: any cut gives the same bits).
  std::vector<const Product*> order;
  std::vector<balance::Span> spans;
  double total = 0;
  for (const Product& p : products) {
    order.push_back(&p);
    spans.push_back({p.a.size(0), static_cast<double>(p.a.size(1)) * static_cast<double>(p.b.size(1))});
    total += static_cast<double>(spans.back().rows) * spans.back().row_work;
  }
  if (!products.empty() && products.front().a.scalar_type() == at::kBFloat16) {
    // bf16: each product whole on oneDNN's threads (LibTorch's pool), then `after` over its rows in parallel.
    for (const Product& p : products) {
      at::Tensor out = p.out;
      mm_bf16(out, p.a, p.b, p.accumulate, p.alpha);
      if (p.after) at::parallel_for(0, p.a.size(0), 64, [&](int64_t lo, int64_t hi) { p.after(lo, hi - lo); });
    }
    return;
  }
  auto run = [&](size_t i, int64_t lo, int64_t n) {
    const Product& p = *order[i];
    at::Tensor o = p.out.narrow(0, lo, n);
    balance::multiply(o, p.a.narrow(0, lo, n), p.b, p.accumulate, p.alpha);
    if (p.after) p.after(lo, n);
  };
  if (threads < 2 || total < static_cast<double>(kMinSplitWork) || at::in_parallel_region()) {
    for (size_t i = 0; i < order.size(); ++i) run(i, 0, spans[i].rows);
    return;
  }
  const balance::Plan plan = scheduler.plan(balance::Region::kProducts, threads);
  const std::vector<double>& shares = plan.shares;
  // Two products on two threads: the cut falls near their border, inside the first product when thread 0
  // is the slower. Let it fall in the one with more rows, whose piece repacks the smaller shared operand.
  if (order.size() == 2 && threads == 2 && (spans[0].rows < spans[1].rows) == (shares[0] < 0.5)) {
    std::swap(order[0], order[1]);
    std::swap(spans[0], spans[1]);
  }
  const auto pieces = balance::cut(spans, shares, plan.unit);
  balance::run_pieces(scheduler, balance::Region::kProducts, spans, pieces,
                      [&](const balance::Piece& k) { run(k.span, k.lo, k.n); });
}

at::Tensor mm(Scheduler& scheduler, const at::Tensor& a, const at::Tensor& b) {
  at::Tensor out = at::empty({a.size(0), b.size(1)}, a.options());
  mm_into(scheduler, out, a, b);
  return out;
}

at::Tensor copy_or_empty(const at::Tensor& weight_bf16, const at::Tensor& weight) {
  return weight_bf16.defined() ? weight_bf16 : at::empty({0}, weight.options());
}

c10::IValue scheduler_value(const SchedulerPtr& scheduler) { return c10::IValue::make_capsule(scheduler); }

Scheduler& scheduler_of(const c10::IValue& value) {
  // The capsule holds a reference: the scheduler lives as long as the value does.
  return *static_cast<Scheduler*>(value.toCapsule().get());
}

at::Tensor linear_act(const SchedulerPtr& scheduler, const at::Tensor& x, const at::Tensor& weight,
                      const at::Tensor& bias, MlpActivation act, const at::Tensor& weight_bf16) {
  auto sizes = x.sizes().vec();
  sizes.back() = weight.size(0);
  const at::Tensor b = bias.defined() ? bias : at::empty({0}, weight.options());  // autograd takes no undefined input
  const bool grad = c10::GradMode::is_enabled() && (x.requires_grad() || weight.requires_grad() || b.requires_grad());
  // The enum crosses autograd's apply() as its value (arguments must be IValues).
  return LinearActFn::apply(x.reshape({-1, x.size(-1)}), weight, b, copy_or_empty(weight_bf16, weight),
                            static_cast<int64_t>(act), grad, scheduler_value(scheduler))
      .view(sizes);
}

at::Tensor linear(const SchedulerPtr& scheduler, const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                  const at::Tensor& weight_bf16) {
  auto sizes = x.sizes().vec();
  sizes.back() = weight.size(0);
  const at::Tensor x2 = x.reshape({-1, x.size(-1)});
  const at::Tensor wb = copy_or_empty(weight_bf16, weight);
  const c10::IValue s = scheduler_value(scheduler);
  return (bias.defined() ? LinearFn::apply(x2, weight, bias, wb, s) : LinearNoBiasFn::apply(x2, weight, wb, s)).view(sizes);
}

}  // namespace lm::model::kernels
