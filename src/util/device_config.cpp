#include "util/device_config.h"

#include "util/errors.h"

namespace lm::util {

Precision parse_precision(std::string_view s) {
  if (s == "auto") return Precision::kAuto;
  if (s == "fp32") return Precision::kFp32;
  if (s == "bf16") return Precision::kBf16;
  throw ConfigError("[device] precision: expected auto | fp32 | bf16, got '" + std::string(s) + "'");
}

std::string to_string(Precision p) {
  switch (p) {
    case Precision::kAuto: return "auto";
    case Precision::kFp32: return "fp32";
    case Precision::kBf16: return "bf16";
  }
  return "?";
}

Kernels parse_kernels(std::string_view s) {
  if (s == "fused") return Kernels::kFused;
  if (s == "plain") return Kernels::kPlain;
  throw ConfigError("[run] kernels: expected fused | plain, got '" + std::string(s) + "'");
}

std::string to_string(Kernels k) { return k == Kernels::kFused ? "fused" : "plain"; }

void check_device_spec(std::string_view spec) {
  if (spec == "auto" || spec == "cpu" || spec == "cuda") return;
  if (spec.rfind("cuda:", 0) == 0 && spec.size() > 5 && spec.size() < 9 &&
      spec.substr(5).find_first_not_of("0123456789") == std::string_view::npos) {
    return;
  }
  throw ConfigError("[device] device: expected auto | cpu | cuda | cuda:N, got '" + std::string(spec) + "'");
}

}  // namespace lm::util
