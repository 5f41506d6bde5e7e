// The device and precision settings as typed values (YAML `run.device`, `run.precision`): spelling only,
// no LibTorch, so config/ can parse them cheaply. util/device.h resolves them on this machine.
#pragma once

#include <string>
#include <string_view>

namespace lm::util {

/// Precision of matrix products. bf16 = bf16 products with fp32 master weights, an fp32 optimizer, and
/// LayerNorm, softmax and the loss in fp32. auto = bf16 on CUDA with compute capability >= 8.0, else fp32.
enum class Precision { kAuto, kFp32, kBf16 };

/// "auto" | "fp32" | "bf16"; throws ConfigError otherwise.
Precision parse_precision(std::string_view s);
std::string to_string(Precision p);

/// How a CPU training step computes (run.kernels). kFused: every matrix product split over LibTorch's
/// threads as single-threaded OpenBLAS calls, with the head's loss and each head's attention fused
/// (model/kernels.h); OpenBLAS's own pool is then 1 thread. kPlain: LibTorch's own ops, OpenBLAS's own
/// threads (run.blas_threads). CUDA and bf16 products always take the plain ops.
enum class Kernels { kFused, kPlain };

/// "fused" | "plain"; throws ConfigError otherwise.
Kernels parse_kernels(std::string_view s);
std::string to_string(Kernels k);

/// Checks the spelling of a device: "auto" | "cpu" | "cuda" | "cuda:N". Throws ConfigError otherwise.
void check_device_spec(std::string_view spec);

}  // namespace lm::util
