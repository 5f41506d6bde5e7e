// Chooses how a training run computes, once, from run.kernels, the device, the product dtype, the
// architecture and the cores: the one place that builds the fused set (docs/ARCHITECTURE.md "The model's
// operations"). The trainer applies the plan as given.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "model/gpt_config.h"
#include "model/ops.h"
#include "model/weight_copies.h"
#include "util/device_config.h"

namespace lm::model {

/// A run's execution plan.
struct ExecutionPlan {
  OpsPtr ops;                                 ///< the model's operations
  c10::ScalarType products = torch::kFloat;   ///< the dtype of every matrix product (fp32 or bf16)
  int torch_threads = 1;                      ///< LibTorch's intra-op threads (oneDNN's bf16 products too)
  int blas_threads = 1;                       ///< OpenBLAS's threads per call
  bool fused_optimizer = false;               ///< AdamW in one fused pass (train/fused_adamw.h), Muon's products split
  /// The bf16 copies of the weights that the fused set's bf16 products read; null otherwise. The optimizer
  /// step calls weights_changed() on it.
  std::shared_ptr<WeightCopies> weights;
  /// Muon's Newton-Schulz products' dtype as the run resolved it (util::choose_precisions); unset: the
  /// optimizer resolves train.muon_precision itself.
  std::optional<c10::ScalarType> muon_products;
  std::string muon_why;                       ///< why that dtype, for the log
  std::string why;                            ///< one line for the log: which set and why
};

/// The plan for `choice` on `device` with products in `dtype`, `threads` (run.threads) LibTorch threads asked
/// for and `cores` (run.blas_threads resolved) cores for this process. kReference: the reference set in
/// `dtype`, OpenBLAS on the cores (LibTorch on them for bf16, whose products are oneDNN's). kFused: the fused
/// CPU set (fp32, or bf16 products through oneDNN), LibTorch's threads on the cores and OpenBLAS on one a
/// call; throws ConfigError (exit 2) naming the option when it does not apply (a GPU, a CPU without AVX2 and
/// FMA, bf16 without oneDNN in the build, an architecture it does not implement). kAuto: the fused set where
/// it applies, else the reference set, saying why.
ExecutionPlan make_ops(util::Kernels choice, const torch::Device& device, c10::ScalarType dtype, const GptConfig& arch,
                       int threads = 1, int cores = 1);

/// True when this build's fused set multiplies in bf16 (oneDNN's headers were found: LMTRAIN_WITH_ONEDNN).
bool fused_bf16_built();

/// The operations of a model that only reads (sample, embed, inspect): the reference set with products in
/// `dtype`, bf16 ones reading copies of the weights made once (the model's weights never change there).
OpsPtr reading_ops(c10::ScalarType dtype);

}  // namespace lm::model
