// kernels::next_token_loss: the tied head's logits, softmax, loss and (when wanted) gradients, one row
// block per thread.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "model/kernels.h"

namespace lm::model::kernels {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Rows of logits a thread holds at a time: 256 x V floats (8 MiB at V 8192), reused block after block.
constexpr int64_t kRowsPerThread = 256;

// The rows of one thread's block `lg` (their logits already in place): turns them into softmax - one-hot,
// scaled by 1/N, when `grad`, and returns the block's summed loss (log-sum-exp - target logit).
double softmax_rows(at::Tensor lg, const at::Tensor& targets, int64_t N, bool grad) {
  const at::Tensor m = lg.amax(1, /*keepdim=*/true);       // (n,1)
  const at::Tensor target_logit = lg.gather(1, targets.unsqueeze(1));  // (n,1)
  lg.sub_(m).exp_();
  const at::Tensor s = lg.sum(1, /*keepdim=*/true);        // (n,1)
  const double loss = (m + s.log() - target_logit).sum(at::kDouble).item<double>();
  if (grad) {
    lg.mul_(s.reciprocal().mul_(1.0 / static_cast<double>(N)));
    float* p = lg.data_ptr<float>();
    const int64_t* y = targets.data_ptr<int64_t>();
    const int64_t V = lg.size(1);
    const float one = 1.0f / static_cast<float>(N);
    for (int64_t r = 0; r < lg.size(0); ++r) p[r * V + y[r]] -= one;
  }
  return loss;
}

struct HeadLossFn : public torch::autograd::Function<HeadLossFn> {
  // h (N,C) contiguous, w (V,C), y (N) int64 contiguous -> mean loss (); the gradients of h and w (when
  // wanted: autograd's grad mode is off in here, so the caller says) are computed here and kept.
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& h, const at::Tensor& w,
                               const at::Tensor& y, bool want_h, bool want_w) {
    const int64_t N = h.size(0), V = w.size(0);
    const int64_t threads = std::max(1, at::get_num_threads());
    const int64_t rows = std::min(N, kRowsPerThread * threads);
    at::Tensor buf = at::empty({rows, V}, h.options());
    at::Tensor dh = want_h ? at::empty_like(h) : at::Tensor();
    at::Tensor dw = want_w ? at::empty_like(w) : at::Tensor();
    const at::Tensor wt = w.t();
    double total = 0.0;
    for (int64_t c0 = 0; c0 < N; c0 += rows) {
      const int64_t n = std::min(rows, N - c0);
      const at::Tensor hc = h.narrow(0, c0, n);
      at::Tensor lg = buf.narrow(0, 0, n);
      const int64_t parts = std::min(threads, n), per = (n + parts - 1) / parts;
      std::vector<double> sums(static_cast<size_t>(parts), 0.0);
      at::parallel_for(0, parts, 1, [&](int64_t begin, int64_t end) {
        const c10::AutoGradMode no_autograd(false);  // thread-local: off on the pool's threads too
        for (int64_t p = begin; p < end; ++p) {
          const int64_t lo = std::min(n, p * per), cnt = std::min(n, lo + per) - lo;
          if (cnt == 0) continue;
          at::Tensor block = lg.narrow(0, lo, cnt);
          at::mm_out(block, hc.narrow(0, lo, cnt), wt);
          sums[static_cast<size_t>(p)] = softmax_rows(block, y.narrow(0, c0 + lo, cnt), N, want_h || want_w);
          if (want_h) {
            at::Tensor dh_block = dh.narrow(0, c0 + lo, cnt);
            at::mm_out(dh_block, block, w);
          }
        }
      });
      total += std::accumulate(sums.begin(), sums.end(), 0.0);
      if (want_w) mm_into(dw, lg.t(), hc, /*accumulate=*/c0 > 0);  // (V,n) @ (n,C)
    }
    ctx->save_for_backward({dh, dw});
    return at::full({}, total / static_cast<double>(N), h.options());
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& g = grads[0];
    auto scaled = [&](const at::Tensor& t) { return t.defined() ? t * g : t; };
    return {scaled(saved[0]), scaled(saved[1]), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor next_token_loss(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& targets) {
  const at::Tensor h = hidden.reshape({-1, hidden.size(-1)}).contiguous();
  const at::Tensor y = targets.reshape({-1}).to(at::kLong).contiguous();
  const bool grad = c10::GradMode::is_enabled();
  return HeadLossFn::apply(h, weight, y, grad && h.requires_grad(), grad && weight.requires_grad());
}

}  // namespace lm::model::kernels
