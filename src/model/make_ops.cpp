#include "model/make_ops.h"

#include "model/fused/fused_ops.h"
#include "util/errors.h"

namespace lm::model {

OpsChoice make_ops(util::Kernels choice, const torch::Device& device, c10::ScalarType dtype, const GptConfig& arch) {
  if (choice == util::Kernels::kReference) {
    return {reference_ops(dtype), "reference ops (run.kernels reference): LibTorch's ops"};
  }
  std::string refused;
  if (!device.is_cpu()) {
    refused = "run.device " + device.str() + ": the fused kernels are CPU code";
  } else if (dtype != torch::kFloat) {
    refused = "run.precision " + std::string(c10::toString(dtype)) + ": the fused kernels compute in float32";
  } else {
    refused = fused::unsupported(arch);
  }
  if (refused.empty()) {
    return {std::make_shared<fused::FusedOps>(arch),
            "fused ops (run.kernels " + util::to_string(choice) + "): CPU float32, and the fused kernels implement "
            "this architecture"};
  }
  if (choice == util::Kernels::kFused) {
    throw ConfigError("[model] run.kernels fused: the fused kernels do not apply: " + refused +
                      ". Hint: set run.kernels to auto (the fused kernels where they apply) or reference");
  }
  return {reference_ops(dtype), "reference ops (run.kernels auto): " + refused};
}

}  // namespace lm::model
