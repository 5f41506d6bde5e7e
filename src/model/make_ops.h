// Chooses a model's set of operations from run.kernels, the device, the compute dtype and the architecture:
// the one place that builds the fused set (docs/ARCHITECTURE.md "The model's operations").
#pragma once

#include <string>

#include "model/gpt_config.h"
#include "model/ops.h"
#include "util/device_config.h"

namespace lm::model {

struct OpsChoice {
  OpsPtr ops;
  std::string why;  ///< one line for the log: which set and why
};

/// kReference: the reference set in `dtype`. kFused: the fused CPU set; throws ConfigError (exit 2) naming
/// the option when it does not apply (a GPU, bf16 products, an architecture it does not implement). kAuto:
/// the fused set where it applies, else the reference set, saying why.
OpsChoice make_ops(util::Kernels choice, const torch::Device& device, c10::ScalarType dtype, const GptConfig& arch);

}  // namespace lm::model
