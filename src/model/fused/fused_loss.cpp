// kernels::next_token_loss: the tied head's logits (soft-capped when asked), softmax, loss and (when wanted) gradients, one row
// block per thread; kernels::embedding, whose sparse gradient autograd adds to the head's dense gradient of
// the same (tied) table.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>
#include <vector>

#include "model/fused/balance.h"
#include "model/fused/bf16_products.h"
#include "model/fused/kernels.h"
#include "model/fused/simd.h"

namespace lm::model::kernels {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Rows of logits a thread holds at a time: at most 1024 and at most 32 MiB of floats (1024 x V at V 8192),
// reused block after block. Each block packs the head matrix for its two products, so larger blocks pack
// it less often per token (512 rather than 256: 1.5% fewer of a config-S step's samples in OpenBLAS's
// packing; 1024 rather than 512, the whole 2048-token batch in one block on two threads: 0.3-0.6% faster
// steps); the byte cap keeps a large vocabulary on many threads from allocating gigabytes.
constexpr int64_t kRowsPerThread = 1024, kBlockBytes = int64_t{32} << 20;

// Probabilities below this are recomputed from the row's logits for the loss (-log of a denormal or zero
// would be inexact or infinite).
constexpr float kTinyProbability = 1e-30f;

// The rows of one thread's block `lg` (their logits already in place, from rows `hb` of the hidden states):
// softmax in place, one row at a time while it sits in cache (simd.h's loop; LibTorch's vectorised kernel,
// serial inside a parallel region, for a row holding a NaN or an infinity); minus
// one at each target when `grad` (the 1/N is the gradient products' alpha). Writes each row's loss,
// -log p(target), to `loss`: the log-normaliser minus the target's logit, or, after LibTorch's softmax, from
// the probability, a row whose target probability underflows getting its logits again (one row-vector
// product) and an exact log-sum-exp.
void softmax_rows(at::Tensor lg, const at::Tensor& hb, const at::Tensor& w, const at::Tensor& targets, bool grad,
                  double softcap, double* loss) {
  float* p = lg.data_ptr<float>();
  const int64_t* y = targets.data_ptr<int64_t>();
  const int64_t V = lg.size(1);
  for (int64_t r = 0; r < lg.size(0); ++r) {
    float* row = p + r * V;
    const float logit = row[y[r]];
    double log_norm = 0.0;
    if (softmax_row(row, row, V, &log_norm)) {
      loss[r] = log_norm - static_cast<double>(logit);
    } else {
      at::Tensor one = lg[r];
      at::_softmax_out(one, one, 0, /*half_to_float=*/false);
      const float pt = row[y[r]];
      if (pt >= kTinyProbability || std::isnan(pt)) {  // NaN (a diverged step): the loss says so, no detour
        loss[r] = -std::log(static_cast<double>(pt));
      } else {
        at::Tensor logits = at::mv(w, hb[r]).to(at::kDouble);  // (V)
        if (softcap > 0.0) logits = at::tanh(logits / softcap) * softcap;
        loss[r] = (logits.logsumexp(0) - logits[y[r]]).item<double>();
      }
    }
    if (grad) row[y[r]] -= 1.0f;
  }
}

// The rows of a block of logits `block` (from rows `hb` of the hidden states, targets `y`) after their
// product: soft-capped a few rows at a time when softcap > 0 (`cap_rows`, while they sit in the core's cache),
// softmaxed, minus one at each target when `grad`, times the cap's slope 1 - tanh^2 when both; each row's loss
// to `loss`.
void finish_rows(at::Tensor block, const at::Tensor& hb, const at::Tensor& w, const at::Tensor& y, bool grad,
                 double softcap, int64_t cap_rows, double* loss) {
  const int64_t n = block.size(0), V = block.size(1);
  const bool slopes = softcap > 0.0 && grad;
  const int64_t step = softcap > 0.0 ? std::min(cap_rows, n) : n;
  at::Tensor slope = slopes ? at::empty({step, V}, block.options()) : at::Tensor();  // d capped / d z = 1 - tanh^2
  for (int64_t r0 = 0; r0 < n; r0 += step) {
    const int64_t nr = std::min(step, n - r0);
    at::Tensor part = block.narrow(0, r0, nr), s = slopes ? slope.narrow(0, 0, nr) : at::Tensor();
    if (softcap > 0.0) {
      part.div_(softcap).tanh_();
      if (slopes) at::mul_out(s, part, part).neg_().add_(1.0);  // 1 + (-t^2): the same bits as 1 - t^2
      part.mul_(softcap);
    }
    softmax_rows(part, hb.narrow(0, r0, nr), w, y.narrow(0, r0, nr), grad, softcap, loss + r0);
    if (slopes) part.mul_(s);
  }
}

struct HeadLossFn : public torch::autograd::Function<HeadLossFn> {
  // h (N,C) contiguous, w (V,C), y (N) int64 contiguous -> mean loss (); the gradients of h and w (when
  // wanted: autograd's grad mode is off in here, so the caller says) are computed here and kept. softcap > 0:
  // the logits z become c tanh(z / c), and the gradient of z is the capped one's times 1 - tanh^2. wb: w's
  // bf16 copy (empty: fp32 products), read by the three products, h and the logits' gradients cast to bf16
  // for them, everything between them fp32.
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& h, const at::Tensor& w, const at::Tensor& y,
                            const at::Tensor& wb, bool want_h, bool want_w, double softcap, const c10::IValue& sched) {
    Scheduler& scheduler = scheduler_of(sched);
    const int64_t N = h.size(0), V = w.size(0);
    const int64_t threads = std::max(1, at::get_num_threads());
    const int64_t per_thread = std::clamp<int64_t>(kBlockBytes / (V * static_cast<int64_t>(sizeof(float))), 8, kRowsPerThread);
    const int64_t rows = std::min(N, per_thread * threads);
    at::Tensor buf = at::empty({rows, V}, h.options());
    const bool grad = want_h || want_w, bf16 = wb.numel() > 0;
    // Soft-capped rows go through the cap, the softmax and the slope a few rows at a time, while they sit in
    // the core's cache (about 256 KiB of logits, and as much of slopes).
    const int64_t cap_rows = std::max<int64_t>(1, (int64_t{256} << 10) / (V * static_cast<int64_t>(sizeof(float))));
    at::Tensor dh = want_h ? at::empty_like(h) : at::Tensor();
    at::Tensor dw = want_w ? at::empty_like(w) : at::Tensor();
    const at::Tensor wt = w.t();
    const at::Tensor hbf = bf16 ? h.to(at::kBFloat16) : at::Tensor();
    const double inv_n = 1.0 / static_cast<double>(N);  // the gradients are of the mean: 1/N as BLAS alpha
    // Row losses, summed in row order after each block of rows (the same sum whatever the threads' shares).
    std::vector<double> losses(static_cast<size_t>(rows));
    double total = 0.0;
    for (int64_t c0 = 0; c0 < N; c0 += rows) {
      const int64_t n = std::min(rows, N - c0);
      const at::Tensor hc = h.narrow(0, c0, n), yc = y.narrow(0, c0, n);
      at::Tensor lg = buf.narrow(0, 0, n);
      if (bf16) {
        // The block's logits on oneDNN's threads, its rows finished in parallel, its two gradient products.
        mm_bf16(lg, hbf.narrow(0, c0, n), wb.t());
        at::parallel_for(0, n, 8, [&](int64_t lo, int64_t hi) {
          const c10::AutoGradMode no_autograd(false);
          finish_rows(lg.narrow(0, lo, hi - lo), hc.narrow(0, lo, hi - lo), w, yc.narrow(0, lo, hi - lo), grad,
                      softcap, cap_rows, losses.data() + lo);
        });
        total = std::accumulate(losses.begin(), losses.begin() + n, total);
        if (!grad) continue;
        const at::Tensor lgb = lg.to(at::kBFloat16);
        if (want_h) {
          at::Tensor dh_block = dh.narrow(0, c0, n);
          mm_bf16(dh_block, lgb, wb, false, inv_n);  // (n,V) @ (V,C)
        }
        if (want_w) mm_bf16(dw, lgb.t(), hbf.narrow(0, c0, n), /*accumulate=*/c0 > 0, inv_n);  // (V,n) @ (n,C)
        continue;
      }
      // The block's rows cut by the threads' speeds (balance.h: the logits' and dh's bits do not depend on the cut).
      const balance::Plan plan = scheduler.plan(balance::Region::kHead, threads);
      const std::vector<balance::Span> spans{{n, static_cast<double>(h.size(1)) * static_cast<double>(V)}};
      balance::run_pieces(scheduler, balance::Region::kHead, spans, balance::cut(spans, plan.shares, plan.unit), [&](const balance::Piece& k) {
        at::Tensor block = lg.narrow(0, k.lo, k.n);
        at::mm_out(block, hc.narrow(0, k.lo, k.n), wt);
        finish_rows(block, hc.narrow(0, k.lo, k.n), w, yc.narrow(0, k.lo, k.n), grad, softcap, cap_rows,
                    losses.data() + k.lo);
        if (want_h) {
          at::Tensor dh_block = dh.narrow(0, c0 + k.lo, k.n);
          at::addmm_out(dh_block, dh_block, block, w, /*beta=*/0, /*alpha=*/inv_n);
        }
      });
      total = std::accumulate(losses.begin(), losses.begin() + n, total);
      if (want_w) mm_into(scheduler, dw, lg.t(), hc, /*accumulate=*/c0 > 0, inv_n);  // (V,n) @ (n,C)
    }
    ctx->save_for_backward({dh, dw});
    return at::full({}, total / static_cast<double>(N), h.options());
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    // The kept gradients are of the mean loss. An incoming gradient of exactly 1 (a plain backward of the
    // loss, one micro-batch) hands them over as they are: no pass over the V x C matrix.
    const at::Tensor& g = grads[0];
    const bool one = g.numel() == 1 && g.is_cpu() && g.item<double>() == 1.0;
    auto scaled = [&](const at::Tensor& t) { return t.defined() && !one ? t * g : t; };
    return {scaled(saved[0]), scaled(saved[1]), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(),
            at::Tensor()};
  }
};

// The token lookup of a tied table. Its gradient is returned sparse (the ids and their gradient rows, as
// nn.Embedding(sparse=True) does): autograd adds it to the dense gradient the head's loss gave the same table
// in the same backward pass, in place when nothing else holds that tensor (autograd's own rule; a retained
// graph still holds it, and then the sum is a new tensor), so no dense V x C gradient of the lookup is ever
// zeroed, scattered and added. Alone (no head gradient of the table in the pass) the table's .grad would be
// sparse: the model always reads its logits through the table it embeds with.
struct EmbeddingFn : public torch::autograd::Function<EmbeddingFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& table, const at::Tensor& ids) {
    ctx->saved_data["rows"] = table.size(0);
    ctx->save_for_backward({ids});
    return at::embedding(table, ids);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    if (!ctx->needs_input_grad(0)) return {at::Tensor(), at::Tensor()};
    const at::Tensor ids = ctx->get_saved_variables()[0].reshape({1, -1});
    const at::Tensor rows = grads[0].reshape({ids.size(1), -1});
    const int64_t V = ctx->saved_data["rows"].toInt();
    return {at::_sparse_coo_tensor_unsafe(ids, rows, {V, rows.size(1)}), at::Tensor()};
  }
};

}  // namespace

at::Tensor embedding(const at::Tensor& table, const at::Tensor& ids) {
  return EmbeddingFn::apply(table, ids.to(at::kLong));
}

at::Tensor next_token_loss(const SchedulerPtr& scheduler, const at::Tensor& hidden, const at::Tensor& weight,
                           const at::Tensor& targets, double softcap, const at::Tensor& weight_bf16) {
  const at::Tensor h = hidden.reshape({-1, hidden.size(-1)}).contiguous();
  const at::Tensor y = targets.reshape({-1}).to(at::kLong).contiguous();
  // The softmax rows are indexed by target without a bounds check: say so here instead (token files are
  // checked against the vocabulary when read; this guards any other caller).
  if (y.numel() > 0) {
    const auto [lo, hi] = at::aminmax(y);  // one pass
    TORCH_CHECK(lo.item<int64_t>() >= 0 && hi.item<int64_t>() < weight.size(0),
                "next_token_loss: a target outside the vocabulary of ", weight.size(0));
  }
  const bool grad = c10::GradMode::is_enabled();
  return HeadLossFn::apply(h, weight, y, copy_or_empty(weight_bf16, weight), grad && h.requires_grad(),
                           grad && weight.requires_grad(), softcap, scheduler_value(scheduler));
}

}  // namespace lm::model::kernels
