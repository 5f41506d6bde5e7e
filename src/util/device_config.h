// The device and precision settings as typed values (YAML `run.device`, `run.precision`): spelling only,
// no LibTorch, so config/ can parse them cheaply. util/device.h resolves them on this machine.
#pragma once

#include <string>
#include <string_view>

namespace lm::util {

/// Precision of matrix products. bf16 = bf16 products with fp32 master weights, an fp32 optimizer, and
/// LayerNorm, softmax and the loss in fp32. auto = bf16 on CUDA with compute capability >= 8.0, and on a CPU
/// with bf16 matrix instructions where a bf16 product is measured faster at start-up (util/device.h
/// choose_precision), else fp32.
enum class Precision { kAuto, kFp32, kBf16 };

/// "auto" | "fp32" | "bf16"; throws ConfigError otherwise.
Precision parse_precision(std::string_view s);
std::string to_string(Precision p);

/// Which set of the model's operations a training run uses (run.kernels; model/ops.h, model/make_ops.h).
/// kFused: the fused CPU set (model/fused/): every matrix product split over LibTorch's threads as
/// single-threaded OpenBLAS calls, the head's loss and each head's attention fused; OpenBLAS's own pool is
/// then 1 thread; refused where it does not apply (a GPU, bf16, an architecture it does not implement).
/// kReference: LibTorch's own ops, OpenBLAS's own threads (run.blas_threads). kAuto: fused where it
/// applies, else the reference set, and the log says which and why.
enum class Kernels { kAuto, kFused, kReference };

/// "auto" | "fused" | "reference" ("plain", the older name of "reference", is read as it); throws
/// ConfigError otherwise.
Kernels parse_kernels(std::string_view s);
std::string to_string(Kernels k);

/// A device as configured (run.device, --device): auto (CUDA when LibTorch sees a GPU), cpu, cuda (the
/// first GPU, or in a multi-process run each rank's own), or cuda:N.
struct DeviceSpec {
  enum class Kind { kAuto, kCpu, kCuda };
  Kind kind = Kind::kAuto;
  int index = -1;  ///< N of cuda:N; -1 when not named
  bool operator==(const DeviceSpec& o) const { return kind == o.kind && index == o.index; }
};

/// "auto" | "cpu" | "cuda" | "cuda:N"; throws ConfigError otherwise.
DeviceSpec parse_device(std::string_view s);
std::string to_string(DeviceSpec d);

}  // namespace lm::util
