#include "train/fused_adamw.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "checkpoint/tensor_files.h"

namespace lm::train {

namespace {

// One parameter's share of the step: its tensors and the step's constants, as LibTorch's AdamW computes
// them (double, then rounded to float where an op takes them as a scalar).
struct Segment {
  float* p;
  const float* g;
  float* m;
  float* v;
  int64_t n;
  float decay;       // 1 - lr * weight_decay
  float beta1, one_minus_beta1, beta2, one_minus_beta2;
  float sqrt_bc2;    // sqrt(1 - beta2^step)
  float eps;
  float neg_step;    // -lr / (1 - beta1^step)
  float grad_scale;  // gradient clipping's factor
};

// Elements [lo, hi) of one segment: the update of torch::optim::AdamW::step, op by op:
// g *= scale (clipping; kept in a register); p *= decay; m = m*b1 + (1-b1)*g; v = v*b2 + (1-b2)*g*g;
// p += -step * (m / (sqrt(v)/sqrt_bc2 + eps)).
void update(const Segment& s, int64_t lo, int64_t hi) {
  // Constants in locals and restrict pointers, so the loop vectorises (no store can change them).
  float* __restrict p = s.p;
  const float* __restrict g = s.g;
  float* __restrict m = s.m;
  float* __restrict v = s.v;
  const float decay = s.decay, b1 = s.beta1, c1 = s.one_minus_beta1, b2 = s.beta2, c2 = s.one_minus_beta2;
  const float sqrt_bc2 = s.sqrt_bc2, eps = s.eps, neg_step = s.neg_step, scale = s.grad_scale;
#pragma omp simd
  for (int64_t i = lo; i < hi; ++i) {
    const float gi = g[i] * scale;
    const float mi = m[i] * b1 + c1 * gi;
    const float vi = v[i] * b2 + c2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    const float denom = std::sqrt(vi) / sqrt_bc2 + eps;
    p[i] = p[i] * decay + neg_step * (mi / denom);
  }
}

bool eligible(const torch::Tensor& p) {
  const torch::Tensor& g = p.grad();
  return p.device().is_cpu() && p.scalar_type() == torch::kFloat && p.is_contiguous() && !g.is_sparse() &&
         g.device().is_cpu() && g.scalar_type() == torch::kFloat && g.is_contiguous() && g.sizes() == p.sizes();
}

}  // namespace

bool fused_adamw_step(torch::optim::AdamW& opt, float grad_scale) {
  auto& state = opt.state();
  for (auto& group : opt.param_groups()) {
    if (static_cast<const torch::optim::AdamWOptions&>(group.options()).amsgrad()) return false;
    for (const auto& p : group.params()) {
      if (p.grad().defined() && !eligible(p)) return false;
    }
  }
  // State loaded from a checkpoint is LibTorch's to interpret unless it has the parameter's layout.
  for (const auto& [key, st] : state) {
    const auto& a = static_cast<const torch::optim::AdamWParamState&>(*st);
    for (const torch::Tensor* t : {&a.exp_avg(), &a.exp_avg_sq()}) {
      if (!t->defined() || !t->device().is_cpu() || t->scalar_type() != torch::kFloat || !t->is_contiguous()) return false;
    }
    if (a.exp_avg().sizes() != a.exp_avg_sq().sizes()) return false;
  }
  torch::NoGradGuard no_grad;
  std::vector<Segment> segs;
  std::vector<int64_t> starts{0};  // element offset of each segment in the concatenation
  for (auto& group : opt.param_groups()) {
    const auto& o = static_cast<const torch::optim::AdamWOptions&>(group.options());
    const double beta1 = std::get<0>(o.betas()), beta2 = std::get<1>(o.betas());
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      auto key = checkpoint::state_key(state, p);
      auto it = state.find(key);
      if (it == state.end()) {  // first step of this parameter: LibTorch's initial state
        auto st = std::make_unique<torch::optim::AdamWParamState>();
        st->step(0);
        st->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        st->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        it = state.emplace(key, std::move(st)).first;
      }
      auto& st = static_cast<torch::optim::AdamWParamState&>(*it->second);
      TORCH_CHECK(st.exp_avg().sizes() == p.sizes(), "fused AdamW: state of another shape than its parameter");
      st.step(st.step() + 1);
      const auto step = static_cast<double>(st.step());
      const double bc1 = 1 - std::pow(beta1, step), bc2 = 1 - std::pow(beta2, step);
      segs.push_back({p.data_ptr<float>(), p.grad().data_ptr<float>(), st.exp_avg().data_ptr<float>(),
                      st.exp_avg_sq().data_ptr<float>(), p.numel(), static_cast<float>(1 - o.lr() * o.weight_decay()),
                      static_cast<float>(beta1), static_cast<float>(1 - beta1), static_cast<float>(beta2),
                      static_cast<float>(1 - beta2), static_cast<float>(std::sqrt(bc2)), static_cast<float>(o.eps()),
                      static_cast<float>(-o.lr() / bc1), grad_scale});
      starts.push_back(starts.back() + p.numel());
    }
  }
  // The concatenation of every segment, cut into contiguous ranges, one per thread.
  at::parallel_for(0, starts.back(), int64_t{1} << 15, [&](int64_t begin, int64_t end) {
    auto k = static_cast<size_t>(std::upper_bound(starts.begin(), starts.end(), begin) - starts.begin() - 1);
    for (; k < segs.size() && starts[k] < end; ++k) {
      const int64_t lo = std::max(begin, starts[k]) - starts[k], hi = std::min(end, starts[k + 1]) - starts[k];
      update(segs[k], lo, hi);
    }
  });
  return true;
}

}  // namespace lm::train
