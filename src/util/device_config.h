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

/// Checks the spelling of a device: "auto" | "cpu" | "cuda" | "cuda:N". Throws ConfigError otherwise.
void check_device_spec(std::string_view spec);

}  // namespace lm::util
