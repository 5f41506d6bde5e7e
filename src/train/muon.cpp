#include "train/muon.h"

#include <algorithm>
#include <atomic>
#include <cmath>

#include <ATen/Parallel.h>

#include "util/errors.h"
#include "util/threads.h"

namespace lm::train {

namespace {

/// a @ b for a product known to be symmetric (m x m): the first half of the rows and the lower-right block
/// are computed, the lower-left block is the mirror of the upper-right one. 3/4 of the multiply-adds, and a
/// result that is symmetric to the bit.
/// A product: `ops`'s in fp32, LibTorch's in bf16 (ops.mm is fp32 only).
struct Products {
  const model::Ops& ops;
  bool bf16;
  torch::Tensor operator()(const torch::Tensor& a, const torch::Tensor& b) const {
    return bf16 ? torch::mm(a, b) : ops.mm(a, b);
  }
};

torch::Tensor symmetric_mm(const torch::Tensor& a, const torch::Tensor& b, const Products& mm) {
  const int64_t m = a.size(0), h = m / 2;
  // In bf16 the whole product: oneDNN's product with a column block (a strided view) costs more than the
  // quarter it saves (measured on this project's machine: 128x256 by a 256x128 view 72 us, 256^3 whole 94 us).
  if (m < 32 || mm.bf16) return mm(a, b);
  torch::Tensor out = torch::empty({m, m}, a.options());
  const torch::Tensor top = mm(a.narrow(0, 0, h), b);  // h x m
  out.narrow(0, 0, h).copy_(top);
  out.narrow(0, h, m - h).narrow(1, h, m - h).copy_(mm(a.narrow(0, h, m - h), b.narrow(1, h, m - h)));
  out.narrow(0, h, m - h).narrow(1, 0, h).copy_(top.narrow(1, h, m - h).t());
  return out;
}

/// How many iterations to run on the Gram matrix between two products with X (an m x n matrix, m <= n): the
/// length s in {1, 2, 3} with the fewest multiply-adds per iteration, (2 m^2 n + (4s - 3) m^3) / s with whole
/// products, (1.75 m^2 n + 0.75 (4s - 3) m^3) / s with symmetric ones (symmetric_mm). s = 1 is the plain
/// iteration; a wide matrix (qkv, fc) gains from s = 3. Longer runs lose precision on the Gram matrix, so s
/// stops at 3 (the result then stays within the plain iteration's own rounding).
int64_t gram_run_length(int64_t m, int64_t n, bool symmetric) {
  const double fn = symmetric ? 1.75 : 2.0, fm = symmetric ? 0.75 : 1.0;
  int64_t best = 1;
  double best_cost = 0;
  for (int64_t s = 1; s <= 3; ++s) {
    const double cost = (fn * static_cast<double>(n) + fm * static_cast<double>(4 * s - 3) * static_cast<double>(m)) /
                        static_cast<double>(s);
    if (s == 1 || cost < best_cost) best = s, best_cost = cost;
  }
  return best;
}

/// newton_schulz's iterations, the result left in the iterations' dtype and on the wide side (g's transpose
/// when g is tall: more rows than columns).
torch::Tensor orthogonalise_wide(const torch::Tensor& g, int64_t steps, const model::Ops& ops, c10::ScalarType dtype) {
  const Products mm{ops, dtype == torch::kBFloat16};
  torch::Tensor x = g.to(torch::kFloat);
  if (x.size(0) > x.size(1)) x = x.t();  // iterate on the wide side: X X^T is the smaller Gram matrix
  x = x / (x.norm() + 1e-7);  // singular values now in (0, 1]
  if (mm.bf16) x = x.to(torch::kBFloat16);
  // X <- P(A) X with A = X X^T and P(A) = a I + b A + c A^2. Within a run of s iterations every matrix is a
  // polynomial in the run's first A, so they commute and the run needs no product with X: A_{k+1} = P_k^2 A_k
  // and Q <- P_k Q, then X <- Q X once. Same iteration in exact arithmetic; m x m products instead of m x n.
  const int64_t run = gram_run_length(x.size(0), x.size(1), /*symmetric=*/!mm.bf16);
  for (int64_t done = 0; done < steps;) {
    const int64_t s = std::min(run, steps - done);
    torch::Tensor a = symmetric_mm(x, x.t(), mm), q;
    for (int64_t k = 0; k < s; ++k) {
      // b A + c A^2: in bf16 one product that adds b A before its single rounding (oneDNN's addmm)
      torch::Tensor p = mm.bf16 ? torch::addmm(a, a, a, kNewtonSchulzB, kNewtonSchulzC)
                                : symmetric_mm(a, a, mm).mul_(kNewtonSchulzC).add_(a, kNewtonSchulzB);
      p.diagonal().add_(kNewtonSchulzA);
      q = k == 0 ? p : symmetric_mm(p, q, mm);
      if (k + 1 < s) a = symmetric_mm(p, symmetric_mm(p, a, mm), mm);
    }
    x = mm(q, x);
    done += s;
  }
  return x;
}

/// m <- mu m + f g and the Nesterov look-ahead u = f g + mu m, returned: one pass over fp32 CPU memory,
/// LibTorch's ops elsewhere. f is the gradient clip's factor (1 for none).
torch::Tensor momentum_step(torch::Tensor& m, const torch::Tensor& g, float f, double mu) {
  if (m.device().is_cpu() && m.scalar_type() == torch::kFloat && g.scalar_type() == torch::kFloat &&
      m.is_contiguous() && g.is_contiguous()) {
    torch::Tensor u = torch::empty_like(m);
    const float* gp = g.data_ptr<float>();
    float* mp = m.data_ptr<float>();
    float* up = u.data_ptr<float>();
    const float muf = static_cast<float>(mu);
    for (int64_t i = 0, n = m.numel(); i < n; ++i) {
      const float gs = gp[i] * f;
      mp[i] = mp[i] * muf + gs;
      up[i] = gs + muf * mp[i];
    }
    return u;
  }
  const torch::Tensor gs = f == 1.0f ? g : g * f;
  m.mul_(mu).add_(gs);
  return gs.add(m, mu);
}

}  // namespace

torch::Tensor newton_schulz(const torch::Tensor& g, int64_t steps, const model::Ops& ops, c10::ScalarType dtype) {
  const torch::Tensor x = orthogonalise_wide(g, steps, ops, dtype).to(torch::kFloat);
  return g.size(0) > g.size(1) ? x.t().contiguous() : x;
}

Muon::Muon(std::vector<std::string> names, std::vector<torch::Tensor> params, double lr, double momentum,
           int64_t ns_steps, model::OpsPtr ops, c10::ScalarType ns_dtype)
    : names_(std::move(names)),
      params_(std::move(params)),
      buffers_(params_.size()),
      lr_(lr),
      momentum_(momentum),
      ns_steps_(ns_steps),
      ops_(std::move(ops)),
      ns_dtype_(ns_dtype) {}

void Muon::step(float grad_scale) {
  torch::NoGradGuard no_grad;
  std::vector<size_t> todo;
  for (size_t i = 0; i < params_.size(); ++i) {
    torch::Tensor& p = params_[i];
    if (!p.grad().defined()) continue;
    if (!buffers_[i].defined()) buffers_[i] = torch::zeros_like(p);
    todo.push_back(i);
  }
  // One job per matrix, all of it on one thread: momentum, Newton-Schulz, the update. Largest first. On the
  // CPU with OpenBLAS on one thread per call (the fused set's setting) the threads take whole matrices one at
  // a time from a shared counter, so a faster thread takes more: a product of 256 rows runs at one core's full
  // speed, while cutting each product over the threads leaves pieces too small for it. A matrix's bits do not
  // depend on the thread it runs on.
  auto work = [&](size_t i) {
    const double rows = static_cast<double>(params_[i].size(0)), cols = static_cast<double>(params_[i].size(1));
    return rows * cols * std::min(rows, cols);
  };
  std::stable_sort(todo.begin(), todo.end(), [&](size_t a, size_t b) { return work(a) > work(b); });
  std::atomic<size_t> next{0};
  auto jobs = [&] {
    const c10::AutoGradMode no_autograd(false);  // thread-local: off on the pool's threads too
    for (size_t k = next++; k < todo.size(); k = next++) {
      torch::Tensor& p = params_[todo[k]];
      const torch::Tensor u = momentum_step(buffers_[todo[k]], p.grad(), grad_scale, momentum_);
      const torch::Tensor x = orthogonalise_wide(u, ns_steps_, *ops_, ns_dtype_);
      const double scale = std::sqrt(std::max(1.0, static_cast<double>(p.size(0)) / static_cast<double>(p.size(1))));
      p.add_(p.size(0) > p.size(1) ? x.t() : x, -lr_ * scale);  // x in bf16 is widened as it is read: no fp32 copy
    }
  };
  const int64_t threads = at::get_num_threads();
  // bf16 products are oneDNN's, which runs one thread a call inside the pool whatever OpenBLAS's setting.
  if (threads > 1 && todo.size() > 1 && (ns_dtype_ == torch::kBFloat16 || util::blas_threads() == 1) &&
      std::all_of(todo.begin(), todo.end(), [&](size_t i) { return params_[i].is_cpu(); })) {
    at::parallel_for(0, threads, 1, [&](int64_t, int64_t) { jobs(); });  // one call per thread
  } else {
    jobs();
  }
}

void Muon::zero_grad() {
  for (auto& p : params_) {
    if (!p.grad().defined()) continue;
    p.mutable_grad().detach_();
    p.mutable_grad().zero_();
  }
}

std::map<std::string, torch::Tensor> Muon::state() const {
  std::map<std::string, torch::Tensor> out;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (buffers_[i].defined()) out[names_[i] + ".momentum_buffer"] = buffers_[i].detach().cpu().contiguous();
  }
  return out;
}

void Muon::load_state(const std::map<std::string, torch::Tensor>& state) {
  for (const auto& [key, t] : state) {
    size_t i = 0;
    while (i < names_.size() && names_[i] + ".momentum_buffer" != key) ++i;
    if (i == names_.size()) {
      throw CheckpointError("[checkpoint] optimizer state has Muon momentum '" + key + "' for a parameter this run "
                            "does not step with Muon. Hint: resume with the checkpoint's train.optimizer");
    }
    if (t.sizes() != params_[i].sizes()) {
      throw CheckpointError("[checkpoint] optimizer state '" + key + "': expected the parameter's shape");
    }
    buffers_[i] = t.to(params_[i].device(), params_[i].scalar_type()).clone();
  }
}

}  // namespace lm::train
