#include "train/muon.h"

#include <cmath>

#include "util/errors.h"

namespace lm::train {

torch::Tensor newton_schulz(const torch::Tensor& g, int64_t steps, const model::Ops& ops) {
  torch::Tensor x = g.to(torch::kFloat);
  const bool tall = x.size(0) > x.size(1);
  if (tall) x = x.t();  // iterate on the wide side: X X^T is the smaller Gram matrix
  x = x / (x.norm() + 1e-7);  // singular values now in (0, 1]
  for (int64_t i = 0; i < steps; ++i) {
    const torch::Tensor a = ops.mm(x, x.t());
    const torch::Tensor b = ops.addmm(a, a, a, kNewtonSchulzB, kNewtonSchulzC);  // b A + c A A
    x = ops.addmm(x, b, x, kNewtonSchulzA, 1.0);                                // a X + B X
  }
  return tall ? x.t().contiguous() : x;
}

Muon::Muon(std::vector<std::string> names, std::vector<torch::Tensor> params, double lr, double momentum,
           int64_t ns_steps, model::OpsPtr ops)
    : names_(std::move(names)),
      params_(std::move(params)),
      buffers_(params_.size()),
      lr_(lr),
      momentum_(momentum),
      ns_steps_(ns_steps),
      ops_(std::move(ops)) {}

void Muon::step() {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    torch::Tensor& p = params_[i];
    if (!p.grad().defined()) continue;
    const torch::Tensor& g = p.grad();
    if (!buffers_[i].defined()) buffers_[i] = torch::zeros_like(p);
    buffers_[i].mul_(momentum_).add_(g);
    const torch::Tensor u = g.add(buffers_[i], momentum_);  // Nesterov: look one momentum step ahead
    const double scale = std::sqrt(std::max(1.0, static_cast<double>(p.size(0)) / static_cast<double>(p.size(1))));
    p.add_(newton_schulz(u, ns_steps_, *ops_).to(p.scalar_type()), -lr_ * scale);
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
