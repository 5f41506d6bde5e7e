#include "train/optimizer.h"

#include <algorithm>

namespace lm::train {

std::vector<torch::Tensor> DecayGroups::all() const {
  std::vector<torch::Tensor> out = decay;
  out.insert(out.end(), no_decay.begin(), no_decay.end());
  out.insert(out.end(), embedding.begin(), embedding.end());
  return out;
}

DecayGroups split_decay_groups(const model::GptImpl& m, double embedding_lr_scale,
                               const std::vector<std::string>& trainable_later) {
  DecayGroups g;
  g.embedding_lr_scale = embedding_lr_scale;
  for (auto& [name, p] : model::named_weights(m)) {
    const bool later = std::find(trainable_later.begin(), trainable_later.end(), name) != trainable_later.end();
    if (!p.requires_grad() && !later) continue;
    const bool is_embedding = name.rfind("tok_emb.", 0) == 0 || name.rfind("pos_emb.", 0) == 0;
    if (later || (is_embedding && embedding_lr_scale != 1.0)) {
      g.embedding_names.push_back(name);
      g.embedding.push_back(p);
      g.embedding_numel += p.numel();
    } else if (p.dim() == 2 && !is_embedding) {
      g.decay_names.push_back(name);
      g.decay.push_back(p);
      g.decay_numel += p.numel();
    } else {
      g.no_decay_names.push_back(name);
      g.no_decay.push_back(p);
      g.no_decay_numel += p.numel();
    }
  }
  return g;
}

std::unique_ptr<torch::optim::AdamW> make_adamw(const DecayGroups& groups, const TrainConfig& cfg) {
  auto opts = [&](double wd) {
    return torch::optim::AdamWOptions(cfg.lr).betas({cfg.beta1, cfg.beta2}).eps(cfg.eps).weight_decay(wd);
  };
  std::vector<torch::optim::OptimizerParamGroup> pg;
  pg.emplace_back(groups.decay, std::make_unique<torch::optim::AdamWOptions>(opts(cfg.weight_decay)));
  pg.emplace_back(groups.no_decay, std::make_unique<torch::optim::AdamWOptions>(opts(0.0)));
  if (!groups.embedding.empty()) pg.emplace_back(groups.embedding, std::make_unique<torch::optim::AdamWOptions>(opts(0.0)));
  return std::make_unique<torch::optim::AdamW>(std::move(pg), opts(cfg.weight_decay));
}

void set_lr(torch::optim::Optimizer& opt, double lr, const DecayGroups& groups) {
  auto& pg = opt.param_groups();
  for (size_t i = 0; i < pg.size(); ++i) {
    const double scale = i == 2 ? groups.embedding_lr_scale : 1.0;
    static_cast<torch::optim::AdamWOptions&>(pg[i].options()).lr(lr * scale);
  }
}

}  // namespace lm::train
