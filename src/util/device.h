// Where tensors live and in which precision matrix products run, on this machine: resolves `run.device`
// (auto | cpu | cuda | cuda:N) and `run.precision` (auto | fp32 | bf16), and `run.deterministic`. Code that needs CUDA headers
// compiles only when CMake found a CUDA LibTorch (LMTRAIN_WITH_CUDA); Debian's CPU LibTorch 1.13 builds
// the rest, and asking it for CUDA is a config error, never a crash.
#pragma once

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <string>

#include "util/device_config.h"

namespace lm::util {

/// The device a spec names on this machine: auto = cuda:0 when LibTorch sees a GPU, else cpu.
/// Throws ConfigError when CUDA is asked for but this LibTorch has no CUDA or sees no such GPU.
c10::Device resolve_device(const DeviceSpec& spec);

/// The dtype of matrix products for `p` on `device` (auto resolved: bf16 on a CUDA GPU of compute capability
/// >= 8.0, fp32 on a CPU). Throws ConfigError for bf16 on a CUDA GPU older than compute capability 8.0.
c10::ScalarType compute_dtype(Precision p, const c10::Device& device);

/// A training run's product dtype and why, for the log.
struct PrecisionChoice {
  c10::ScalarType dtype;
  std::string why;
};

/// A bf16 product must run at least this many times as fast as the fp32 one for auto to pick bf16 on a CPU.
constexpr double kBf16Margin = 1.3;

/// A run's two precisions: its matrix products' (run.precision) and Muon's Newton-Schulz products'
/// (train.muon_precision).
struct RunPrecisions {
  PrecisionChoice products, muon;
};

/// Both resolved on `device`. Under auto: bf16 on a CUDA GPU of compute capability >= 8.0; fp32 on a CPU
/// without bf16 matrix instructions; on a CPU with them (AMX-BF16, AVX512-BF16) one measurement decides:
/// a product of a training shape (2048 x 256 @ 256 x 1024) in fp32 and in bf16 on this process's threads,
/// alternated, best of 3 each (about 0.1 s); bf16 when it runs at least kBf16Margin times as fast. The CPUs
/// differ here: AMX tiles multiply bf16 several times as fast as fp32 kernels; AVX512-BF16 alone ran 2.3x
/// fp32 on one machine and 0.3-0.8x on another. `bf16_usable` false (the kernels that would run cannot
/// multiply bf16 in this build): run.precision auto stays fp32 on a CPU. Throws ConfigError for bf16 on a
/// CUDA GPU older than 8.0.
RunPrecisions choose_precisions(Precision products, Precision muon, const c10::Device& device, bool bf16_usable = true);

/// run.precision alone (choose_precisions).
PrecisionChoice choose_precision(Precision p, const c10::Device& device, bool bf16_usable = true);

/// True when `device` multiplies bf16 matrices in hardware: a CUDA GPU of compute capability >= 8.0, or a
/// CPU with AVX512-BF16 or AMX-BF16 instructions and a LibTorch built with oneDNN (which uses them).
bool native_bf16_products(const c10::Device& device);

/// The dtype of Muon's Newton-Schulz products (train.muon_precision) on `device`, as choose_precisions
/// resolves it (a training run resolves it once there, for every rank and a resume).
c10::ScalarType muon_dtype(Precision p, const c10::Device& device);

/// "fp32" or "bf16" for a compute dtype.
std::string precision_name(c10::ScalarType dtype);

/// One line for the log: "cpu (1 thread, 23.5 GiB memory)", "cuda:0 (NVIDIA H200, compute 9.0, 139.8 GiB)".
std::string describe_device(const c10::Device& device);

/// LibTorch's deterministic algorithms (at::globalContext().setDeterministicAlgorithms); on CUDA also sets
/// CUBLAS_WORKSPACE_CONFIG=:4096:8 unless it is set, which cuBLAS needs for reproducible products.
void use_deterministic_algorithms();

}  // namespace lm::util
