#include "util/device.h"

#include <ATen/Context.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#ifdef LMTRAIN_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

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

bool native_bf16_products(const c10::Device& device) {
  if (device.is_cuda()) return compute_capability(device) >= 80;
#if defined(__x86_64__) && defined(__GNUC__)
  return at::hasMKLDNN() && (__builtin_cpu_supports("avx512bf16") || __builtin_cpu_supports("amx-bf16"));
#else
  return false;
#endif
}

c10::ScalarType muon_dtype(Precision p, const c10::Device& device) {
  if (p == Precision::kAuto) return native_bf16_products(device) ? c10::kBFloat16 : c10::kFloat;
  return compute_dtype(p, device);
}

std::string precision_name(c10::ScalarType dtype) { return dtype == c10::kBFloat16 ? "bf16" : "fp32"; }

std::string describe_device(const c10::Device& device) {
  if (!device.is_cuda()) {
    const int n = torch::get_num_threads(), blas = blas_threads();
    const std::string core = blas_core();
    const double ram = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGE_SIZE));
    char buf[192];
    std::snprintf(buf, sizeof buf, "cpu (%d thread%s, %d BLAS thread%s%s%s%s, %.1f GiB memory)", n, n == 1 ? "" : "s",
                  blas, blas == 1 ? "" : "s", core.empty() ? "" : ", OpenBLAS ", core.c_str(),
                  core.empty() ? "" : " kernels", ram / (1024.0 * 1024.0 * 1024.0));
    return buf;
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
