// The optimizers of a run (docs/ARCHITECTURE.md "Model contract"): AdamW with decay groups (2-D matmul weights
// decayed; token and position embeddings, LayerNorm parameters and biases not), or, with train.optimizer:
// muon, Muon (train/muon.h) for the transformer blocks' 2-D matrices and that AdamW for everything else.
#pragma once

#include <torch/torch.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model/gpt.h"
#include "model/make_ops.h"
#include "train/muon.h"
#include "train/train_config.h"

namespace lm::train {

/// Parameter names and tensors of each optimizer group (trainable parameters only).
struct DecayGroups {
  std::vector<std::string> decay_names, no_decay_names, embedding_names, muon_names;
  std::vector<torch::Tensor> decay, no_decay, embedding, muon;
  int64_t decay_numel = 0, no_decay_numel = 0, embedding_numel = 0, muon_numel = 0;
  double embedding_lr_scale = 1.0;  ///< lr multiplier of the `embedding` group
  /// Every tensor of the groups, in group order (the order gradient clipping sees them); muon last.
  std::vector<torch::Tensor> all() const;
};

/// Splits the model's trainable parameters: decay = 2-D weights other than tok_emb/pos_emb; the rest is
/// undecayed. With embedding_lr_scale != 1, tok_emb/pos_emb form an `embedding` group (undecayed) whose lr
/// is scaled (fine-tuning: finetune.embedding_lr_scale). Frozen parameters named in `trainable_later`
/// (embeddings unfrozen mid-run) join that group from the start: with no gradient they get no
/// AdamW state until they are unfrozen, and the group layout and parameter order never change, so a
/// resumed run clips and steps exactly as an uninterrupted one. With `muon`, the 2-D weights under
/// `blocks.` go to the `muon` group instead of `decay` (an untied head stays in `decay`).
DecayGroups split_decay_groups(const model::GptImpl& m, double embedding_lr_scale = 1.0,
                               const std::vector<std::string>& trainable_later = {}, bool muon = false);

/// Gradient clipping's figures, as torch::nn::utils::clip_grad_norm_ computes them: the total 2-norm of
/// the gradients (per-tensor norms, then the norm of those) and the factor min(1, max_norm / (norm + 1e-6))
/// (a 0-dim tensor on the gradients' device, and its float value). Changes no gradient: RunOptimizer::step
/// applies the factor. norm 0 and factor 1 when no parameter has a gradient.
struct GradClip {
  double norm = 0.0;
  torch::Tensor factor;
  float factor_value = 1.0f;
};
GradClip grad_clip(const std::vector<torch::Tensor>& params, double max_norm);

/// AdamW over the decay, no-decay and embedding groups (empty ones left out) and, when the muon group is
/// not empty, Muon over it. One step() steps both; set_lr sets both from the one schedule.
class RunOptimizer {
 public:
  /// `plan`: the run's (model/make_ops.h). With its fused optimizer AdamW steps in one fused pass
  /// (train/fused_adamw.h); Muon's products run on its ops; after every step its weight copies (if any) are
  /// told that the weights changed. Default: the reference set in fp32.
  explicit RunOptimizer(const DecayGroups& groups, const TrainConfig& cfg, const model::ExecutionPlan& plan = {});

  /// `lr` is train.lr's schedule at this step: AdamW groups get lr (the embedding group lr * scale), Muon
  /// gets lr * muon_lr / train.lr.
  void set_lr(double lr);
  /// One update with every gradient taken times `clip.factor`: in the fused AdamW pass (the fused set,
  /// no Muon) as it reads each gradient, else by scaling the gradients first, as clip_grad_norm_ does.
  /// The same numbers either way (one float product per element); only the gradients left behind differ
  /// (unscaled after the fused pass), and nothing reads them before the next step resets them. Default: no
  /// clipping.
  void step(const GradClip& clip = {});
  void zero_grad();
  /// Forgets AdamW's moments and step count of `p`, as for a tensor that starts training now.
  void restart_state(const torch::Tensor& p);

  const torch::optim::AdamW& adamw() const { return *adamw_; }
  torch::optim::AdamW& adamw() { return *adamw_; }
  /// Null unless train.optimizer is muon and some block matrix is trainable.
  Muon* muon() { return muon_.get(); }
  /// Muon's state for a checkpoint (empty without Muon).
  std::map<std::string, torch::Tensor> muon_state() const;

 private:
  std::unique_ptr<torch::optim::AdamW> adamw_;
  std::vector<double> group_lr_scale_;  ///< per AdamW group
  std::unique_ptr<Muon> muon_;
  double muon_lr_ratio_ = 1.0;
  bool fused_step_ = false;  ///< AdamW's fused pass (the plan's fused optimizer)
  std::shared_ptr<model::WeightCopies> copies_;  ///< the plan's bf16 weight copies, or null
};

}  // namespace lm::train
