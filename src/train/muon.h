// Muon ("MomentUm Orthogonalized by Newton-Schulz", K. Jordan et al., 2024), written from its published
// description: SGD momentum with a Nesterov look-ahead, then each 2-D update is replaced by an approximation
// of its nearest semi-orthogonal matrix (U V^T of its SVD) by a few quintic Newton-Schulz iterations, and
// scaled by sqrt(max(1, rows / cols)). lmtrain steps the transformer blocks' 2-D weight matrices with it and
// everything else with AdamW (train/optimizer.h; docs/training.md "Optimizers").
#pragma once

#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

#include "model/ops.h"

namespace lm::train {

/// Coefficients (a, b, c) of the quintic iteration X <- a X + b (X X^T) X + c (X X^T)^2 X, chosen (in the
/// published Muon) to push every singular value in (0, 1] quickly towards ~1 rather than to converge exactly:
/// after 5 steps the singular values lie roughly in [0.7, 1.2], except those that started tiny against the
/// Frobenius norm (a nearly rank-deficient update), which grow by about a = 3.4 per step.
inline constexpr double kNewtonSchulzA = 3.4445, kNewtonSchulzB = -4.7750, kNewtonSchulzC = 2.0315;

/// Approximately orthogonalises a 2-D matrix `g` (rows x cols): normalises it by its Frobenius norm, runs
/// `steps` quintic iterations on the wide orientation (rows <= cols, transposing if needed) and returns the
/// result in `g`'s shape, in fp32. `dtype` kFloat: the products by `ops` (the model's operations: the fused
/// set splits them over the threads); kBFloat16: the iterations in bf16 (LibTorch's products, oneDNN's on
/// the CPU), as the published Muon runs them: about 2.3x the fp32 speed on a CPU with AVX512-BF16, and the
/// result within bf16 rounding of the fp32 one (about 3% of its norm for a full-rank update, 10% for a nearly
/// rank-deficient one). REQUIRES: g.dim() == 2, steps >= 1.
torch::Tensor newton_schulz(const torch::Tensor& g, int64_t steps, const model::Ops& ops = *model::reference_ops(),
                            c10::ScalarType dtype = torch::kFloat);

/// Muon over a fixed list of 2-D parameters. Per parameter p with gradient g and momentum buffer m (zero at
/// first): m <- mu m + g; u <- g + mu m; p <- p - lr sqrt(max(1, rows/cols)) newton_schulz(u). No weight
/// decay. Parameters without a gradient (frozen) are skipped and get no state. A fused matrix (lmtrain's
/// attention `qkv`, 3C x C) is orthogonalised as one matrix, not as three C x C blocks.
class Muon {
 public:
  /// `ops`: the model's operations, which make the fp32 Newton-Schulz products; `ns_dtype`: the iterations'
  /// dtype (newton_schulz; train.muon_precision resolved by util::muon_dtype).
  Muon(std::vector<std::string> names, std::vector<torch::Tensor> params, double lr, double momentum, int64_t ns_steps,
       model::OpsPtr ops = model::reference_ops(), c10::ScalarType ns_dtype = torch::kFloat);

  /// `grad_scale`: multiplies every gradient as it is read (the gradient clip's factor; 1 for none).
  void step(float grad_scale = 1.0f);
  void zero_grad();  ///< as torch::optim::Optimizer::zero_grad: defined gradients are detached and zeroed
  void set_lr(double lr) { lr_ = lr; }
  double lr() const { return lr_; }
  const std::vector<std::string>& names() const { return names_; }
  const std::vector<torch::Tensor>& params() const { return params_; }

  /// Momentum buffers of the parameters that have one, keyed "<param name>.momentum_buffer" (CPU, contiguous).
  std::map<std::string, torch::Tensor> state() const;
  /// Restores state() output. Throws CheckpointError for a name that is not one of this optimizer's
  /// parameters or a shape that differs.
  void load_state(const std::map<std::string, torch::Tensor>& state);

 private:
  std::vector<std::string> names_;
  std::vector<torch::Tensor> params_, buffers_;  ///< buffers_[i] undefined until params_[i] first steps
  double lr_, momentum_;
  int64_t ns_steps_;
  model::OpsPtr ops_;
  c10::ScalarType ns_dtype_;
};

}  // namespace lm::train
