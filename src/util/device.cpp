#include "util/device.h"

#include <ATen/Context.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <cstdio>
#include <cstdlib>

#ifdef LMTRAIN_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

#include "util/blas_kernels.h"
#include "util/errors.h"
#include "util/threads.h"

namespace lm::util {

namespace {

// CUDA compute capability as major*10+minor; 0 when unknown (no CUDA headers in this build).
int compute_capability(const c10::Device& device) {
#ifdef LMTRAIN_WITH_CUDA
  const cudaDeviceProp* p = at::cuda::getDeviceProperties(device.index());
  return p->major * 10 + p->minor;
#else
  (void)device;
  return 0;
#endif
}

}  // namespace

c10::Device resolve_device(const DeviceSpec& spec) {
  const bool cuda = torch::cuda::is_available();
  const bool is_auto = spec.kind == DeviceSpec::Kind::kAuto;
  if (spec.kind == DeviceSpec::Kind::kCpu || (is_auto && !cuda)) return c10::Device(c10::kCPU);
  if (is_auto) return c10::Device(c10::kCUDA, 0);
  if (!cuda) {
    throw ConfigError("[device] device '" + to_string(spec) + "': expected a CUDA GPU, got none (" +
#ifdef LMTRAIN_WITH_CUDA
                      std::string("LibTorch sees no GPU") +
#else
                      std::string("this lmtrain was built against a CPU-only LibTorch") +
#endif
                      "). Hint: --set run.device=cpu, or build against a CUDA LibTorch (docs/install.md).");
  }
  const int index = spec.index < 0 ? 0 : spec.index;
  const int count = static_cast<int>(torch::cuda::device_count());
  if (index >= count) {
    throw ConfigError("[device] device '" + to_string(spec) + "': expected an index below " + std::to_string(count) +
                      " (GPUs LibTorch sees), got " + std::to_string(index));
  }
  return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(index));
}

c10::ScalarType compute_dtype(Precision p, const c10::Device& device) {
  const int cc = device.is_cuda() ? compute_capability(device) : 0;
  if (p == Precision::kAuto) return device.is_cuda() && cc >= 80 ? c10::kBFloat16 : c10::kFloat;
  if (p == Precision::kFp32) return c10::kFloat;
  if (device.is_cuda() && cc > 0 && cc < 80) {
    throw ConfigError("[device] precision bf16: expected a GPU of compute capability >= 8.0, got " +
                      std::to_string(cc / 10) + "." + std::to_string(cc % 10) + ". Hint: --set run.precision=fp32");
  }
  return c10::kBFloat16;
}

namespace {

// Seconds of the fastest of 3 products a @ b (after one to warm up), in their dtype; the caller alternates.
double product_seconds(const torch::Tensor& a, const torch::Tensor& b) {
  (void)torch::mm(a, b);
  double best = 1e30;
  for (int i = 0; i < 3; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    (void)torch::mm(a, b);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

// The CPU's bf16 instructions, for the log.
std::string bf16_isa() {
#if defined(__x86_64__) && defined(__GNUC__)
  if (__builtin_cpu_supports("amx-bf16")) return "AMX-BF16";
  if (__builtin_cpu_supports("avx512bf16")) return "AVX512-BF16";
#endif
  return "none";
}

}  // namespace

namespace {

// fp32 seconds / bf16 seconds of a training-shaped product on this process's threads (see choose_precisions).
double bf16_speed_ratio() {
  const torch::NoGradGuard no_grad;
  const auto a = torch::randn({2048, 256}), b = torch::randn({256, 1024});
  const auto ab = a.to(c10::kBFloat16), bb = b.to(c10::kBFloat16);
  double fp32 = 1e30, bf16 = 1e30;
  for (int round = 0; round < 2; ++round) {
    fp32 = std::min(fp32, product_seconds(a, b));
    bf16 = std::min(bf16, product_seconds(ab, bb));
  }
  return fp32 / bf16;
}

// One precision resolved without measuring, or nullopt when auto on a CPU with bf16 instructions needs the
// measurement. `key`: the config key, for the log.
std::optional<PrecisionChoice> unmeasured(Precision p, const c10::Device& device, const char* key) {
  if (p != Precision::kAuto) return PrecisionChoice{compute_dtype(p, device), std::string(key) + " " + to_string(p)};
  if (device.is_cuda()) {
    const bool bf16 = native_bf16_products(device);
    return PrecisionChoice{bf16 ? c10::kBFloat16 : c10::kFloat,
                           bf16 ? "auto: a GPU of compute capability >= 8.0" : "auto: an older GPU"};
  }
  if (!native_bf16_products(device)) return PrecisionChoice{c10::kFloat, "auto: this CPU has no bf16 matrix instructions"};
  return std::nullopt;
}

}  // namespace

RunPrecisions choose_precisions(Precision products, Precision muon, const c10::Device& device, bool bf16_usable) {
  std::optional<PrecisionChoice> p = unmeasured(products, device, "run.precision");
  if (!p && !bf16_usable) p = PrecisionChoice{c10::kFloat, "auto: this build's fused kernels have no oneDNN for bf16 products"};
  std::optional<PrecisionChoice> m = unmeasured(muon, device, "train.muon_precision");
  if (!p || !m) {
    const double ratio = bf16_speed_ratio();
    const c10::ScalarType dtype = ratio >= kBf16Margin ? c10::kBFloat16 : c10::kFloat;
    char buf[200];
    std::snprintf(buf, sizeof buf, "auto: this CPU's bf16 products (%s) ran %.2fx fp32's here (2048x256x1024, %s %.2fx)",
                  bf16_isa().c_str(), ratio, ratio >= kBf16Margin ? "bf16 from" : "fp32 below", kBf16Margin);
    if (!p) p = PrecisionChoice{dtype, buf};
    if (!m) m = PrecisionChoice{dtype, buf};
  }
  return {*p, *m};
}

PrecisionChoice choose_precision(Precision p, const c10::Device& device, bool bf16_usable) {
  return choose_precisions(p, Precision::kFp32, device, bf16_usable).products;
}

bool native_bf16_products(const c10::Device& device) {
  if (device.is_cuda()) return compute_capability(device) >= 80;
#if defined(__x86_64__) && defined(__GNUC__)
  return at::hasMKLDNN() && (__builtin_cpu_supports("avx512bf16") || __builtin_cpu_supports("amx-bf16"));
#else
  return false;
#endif
}

c10::ScalarType muon_dtype(Precision p, const c10::Device& device) {
  return choose_precisions(Precision::kFp32, p, device).muon.dtype;
}

std::string precision_name(c10::ScalarType dtype) { return dtype == c10::kBFloat16 ? "bf16" : "fp32"; }

std::string describe_device(const c10::Device& device) {
  if (!device.is_cuda()) {
    const int n = torch::get_num_threads(), blas = blas_threads();
    const std::string kernels = describe_blas_kernels();
    const double ram = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGE_SIZE));
    char buf[160];
    std::snprintf(buf, sizeof buf, "cpu (%d thread%s, %d BLAS thread%s, %.1f GiB memory)", n, n == 1 ? "" : "s", blas,
                  blas == 1 ? "" : "s", ram / (1024.0 * 1024.0 * 1024.0));
    return kernels.empty() ? std::string(buf) : std::string(buf) + ", OpenBLAS kernels " + kernels;
  }
#ifdef LMTRAIN_WITH_CUDA
  const cudaDeviceProp* p = at::cuda::getDeviceProperties(device.index());
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s (%s, compute %d.%d, %.1f GiB)", device.str().c_str(), p->name, p->major, p->minor,
                static_cast<double>(p->totalGlobalMem) / (1024.0 * 1024.0 * 1024.0));
  return buf;
#else
  return device.str();
#endif
}

void use_deterministic_algorithms() {
  ::setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", /*overwrite=*/0);
  at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/false);
}

}  // namespace lm::util
