#include "model/make_ops.h"

#include <algorithm>

#include "model/fused/bf16_products.h"
#include "model/fused/fused_ops.h"
#include "model/fused/simd.h"
#include "util/errors.h"

namespace lm::model {

namespace {

// Why the fused set cannot run here, or "".
std::string fused_refused(const torch::Device& device, c10::ScalarType dtype, const GptConfig& arch) {
  if (!device.is_cpu()) return "run.device " + device.str() + ": the fused kernels are CPU code";
  if (!kernels::simd_loops()) return "this CPU lacks AVX2 and FMA, which the fused kernels' loops need";
  if (dtype == torch::kBFloat16 && !kernels::bf16_products_built()) {
    return "run.precision bf16: this build has no oneDNN for the fused kernels' bf16 products";
  }
  if (dtype != torch::kFloat && dtype != torch::kBFloat16) {
    return "run.precision " + std::string(c10::toString(dtype)) + ": the fused kernels compute in fp32 or bf16";
  }
  return fused::unsupported(arch);
}

}  // namespace

ExecutionPlan make_ops(util::Kernels choice, const torch::Device& device, c10::ScalarType dtype, const GptConfig& arch,
                       int threads, int cores) {
  const std::string refused = choice == util::Kernels::kReference ? "" : fused_refused(device, dtype, arch);
  if (choice != util::Kernels::kReference && refused.empty()) {
    ExecutionPlan plan;
    plan.products = dtype;
    if (dtype == torch::kBFloat16) plan.weights = std::make_shared<WeightCopies>();
    plan.ops = std::make_shared<fused::FusedOps>(arch, dtype, plan.weights);
    // One pool: LibTorch's threads run the split products (each block single-threaded OpenBLAS), oneDNN's
    // bf16 products and the rest.
    plan.torch_threads = std::max(threads, cores);
    plan.blas_threads = 1;
    plan.fused_optimizer = true;
    plan.why = "fused ops (run.kernels " + util::to_string(choice) + "): CPU, " +
               (dtype == torch::kBFloat16 ? "bf16 products (oneDNN) on fp32 weights" : "float32") +
               ", and the fused kernels implement this architecture";
    return plan;
  }
  if (choice == util::Kernels::kFused) {
    throw ConfigError("[model] run.kernels fused: the fused kernels do not apply: " + refused +
                      ". Hint: set run.kernels to auto (the fused kernels where they apply) or reference");
  }
  ExecutionPlan plan;
  plan.ops = reference_ops(dtype);
  plan.products = dtype;
  // bf16 products on a CPU are oneDNN's, on LibTorch's threads; fp32 ones are OpenBLAS's, on its own.
  const bool onednn = device.is_cpu() && dtype == torch::kBFloat16;
  plan.torch_threads = onednn ? std::max(threads, cores) : threads;
  plan.blas_threads = onednn ? 1 : cores;
  plan.why = choice == util::Kernels::kReference ? "reference ops (run.kernels reference): LibTorch's ops"
                                                 : "reference ops (run.kernels auto): " + refused;
  return plan;
}

bool fused_bf16_built() { return kernels::bf16_products_built(); }

OpsPtr reading_ops(c10::ScalarType dtype) {
  if (dtype != torch::kBFloat16) return reference_ops(dtype);
  return std::make_shared<ReferenceOps>(dtype, std::make_shared<WeightCopies>());
}

}  // namespace lm::model
