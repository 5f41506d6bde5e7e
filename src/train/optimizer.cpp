#include "train/optimizer.h"

#include <algorithm>

#include "checkpoint/tensor_files.h"
#include "train/fused_adamw.h"
#include "util/device.h"

namespace lm::train {

std::vector<torch::Tensor> DecayGroups::all() const {
  std::vector<torch::Tensor> out = decay;
  out.insert(out.end(), no_decay.begin(), no_decay.end());
  out.insert(out.end(), embedding.begin(), embedding.end());
  out.insert(out.end(), muon.begin(), muon.end());
  return out;
}

DecayGroups split_decay_groups(const model::GptImpl& m, double embedding_lr_scale,
                               const std::vector<std::string>& trainable_later, bool muon) {
  DecayGroups g;
  g.embedding_lr_scale = embedding_lr_scale;
  auto add = [](std::vector<std::string>& names, std::vector<torch::Tensor>& ps, int64_t& numel,
                const std::string& name, const torch::Tensor& p) {
    names.push_back(name);
    ps.push_back(p);
    numel += p.numel();
  };
  for (auto& [name, p] : model::named_weights(m)) {
    const bool later = std::find(trainable_later.begin(), trainable_later.end(), name) != trainable_later.end();
    if (!p.requires_grad() && !later) continue;
    const bool is_embedding = name.rfind("tok_emb.", 0) == 0 || name.rfind("pos_emb.", 0) == 0;
    if (later || (is_embedding && embedding_lr_scale != 1.0)) {
      add(g.embedding_names, g.embedding, g.embedding_numel, name, p);
    } else if (p.dim() == 2 && !is_embedding && muon && name.rfind("blocks.", 0) == 0) {
      add(g.muon_names, g.muon, g.muon_numel, name, p);
    } else if (p.dim() == 2 && !is_embedding) {
      add(g.decay_names, g.decay, g.decay_numel, name, p);
    } else {
      add(g.no_decay_names, g.no_decay, g.no_decay_numel, name, p);
    }
  }
  return g;
}

RunOptimizer::RunOptimizer(const DecayGroups& groups, const TrainConfig& cfg, const model::ExecutionPlan& plan)
    : fused_step_(plan.fused_optimizer), copies_(plan.weights) {
  model::OpsPtr ops = plan.ops ? plan.ops : model::reference_ops();
  auto opts = [&](double wd) {
    return torch::optim::AdamWOptions(cfg.lr).betas({cfg.beta1, cfg.beta2}).eps(cfg.eps).weight_decay(wd);
  };
  std::vector<torch::optim::OptimizerParamGroup> pg;
  auto add = [&](const std::vector<torch::Tensor>& ps, double wd, double lr_scale) {
    if (ps.empty()) return;
    pg.emplace_back(ps, std::make_unique<torch::optim::AdamWOptions>(opts(wd)));
    group_lr_scale_.push_back(lr_scale);
  };
  add(groups.decay, cfg.weight_decay, 1.0);
  add(groups.no_decay, 0.0, 1.0);
  add(groups.embedding, 0.0, groups.embedding_lr_scale);
  adamw_ = std::make_unique<torch::optim::AdamW>(std::move(pg), opts(cfg.weight_decay));
  if (!groups.muon.empty()) {
    muon_ = std::make_unique<Muon>(groups.muon_names, groups.muon, cfg.muon_lr, cfg.muon_momentum, cfg.muon_ns_steps,
                                   std::move(ops),
                                   plan.muon_products ? *plan.muon_products
                                                      : util::muon_dtype(cfg.muon_precision, groups.muon.front().device()));
    muon_lr_ratio_ = cfg.muon_lr / cfg.lr;
  }
}

void RunOptimizer::set_lr(double lr) {
  auto& pg = adamw_->param_groups();
  for (size_t i = 0; i < pg.size(); ++i) {
    static_cast<torch::optim::AdamWOptions&>(pg[i].options()).lr(lr * group_lr_scale_[i]);
  }
  if (muon_) muon_->set_lr(lr * muon_lr_ratio_);
}

GradClip grad_clip(const std::vector<torch::Tensor>& params, double max_norm) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> norms;
  for (const auto& p : params) {
    if (p.grad().defined()) norms.push_back(p.grad().norm(2));
  }
  GradClip out;
  if (norms.empty()) return out;
  const torch::Tensor total = norms.size() == 1 ? norms[0] : torch::stack(norms).norm(2);
  out.factor = torch::clamp(max_norm / (total + 1e-6), c10::nullopt, 1.0);
  out.norm = total.item<double>();
  out.factor_value = out.factor.item<float>();
  return out;
}

void RunOptimizer::step(const GradClip& clip) {
  const bool scaled = clip.factor.defined() && clip.factor_value != 1.0f;
  auto scale = [&](const std::vector<torch::Tensor>& params) {
    if (!scaled) return;
    torch::NoGradGuard no_grad;
    for (const auto& p : params) {
      if (p.grad().defined()) p.grad().mul_(clip.factor);
    }
  };
  // The fused set: the same AdamW update in one pass (train/fused_adamw.h), the factor applied as each
  // gradient is read; otherwise the gradients scaled in place, then LibTorch's AdamW.
  const bool fused = fused_step_ && fused_adamw_step(*adamw_, scaled ? clip.factor_value : 1.0f);
  if (!fused) {
    for (auto& group : adamw_->param_groups()) scale(group.params());
    adamw_->step();
  }
  if (muon_) muon_->step(scaled ? clip.factor_value : 1.0f);  // the factor applied as each gradient is read
  if (copies_) copies_->weights_changed();
}

void RunOptimizer::zero_grad() {
  adamw_->zero_grad();
  if (muon_) muon_->zero_grad();
}

void RunOptimizer::restart_state(const torch::Tensor& p) {
  adamw_->state().erase(checkpoint::state_key(adamw_->state(), p));
}

std::map<std::string, torch::Tensor> RunOptimizer::muon_state() const {
  return muon_ ? muon_->state() : std::map<std::string, torch::Tensor>{};
}

}  // namespace lm::train
