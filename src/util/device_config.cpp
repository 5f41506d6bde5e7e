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
  if (s == "auto") return Kernels::kAuto;
  if (s == "fused") return Kernels::kFused;
  if (s == "reference" || s == "plain") return Kernels::kReference;
  throw ConfigError("[run] kernels: expected auto | fused | reference, got '" + std::string(s) + "'");
}

std::string to_string(Kernels k) {
  switch (k) {
    case Kernels::kAuto: return "auto";
    case Kernels::kFused: return "fused";
    case Kernels::kReference: return "reference";
  }
  return "?";
}

DeviceSpec parse_device(std::string_view s) {
  if (s == "auto") return {};
  if (s == "cpu") return {DeviceSpec::Kind::kCpu, -1};
  if (s == "cuda") return {DeviceSpec::Kind::kCuda, -1};
  if (s.rfind("cuda:", 0) == 0 && s.size() > 5 && s.size() < 9 &&
      s.substr(5).find_first_not_of("0123456789") == std::string_view::npos) {
    return {DeviceSpec::Kind::kCuda, std::stoi(std::string(s.substr(5)))};
  }
  throw ConfigError("[device] device: expected auto | cpu | cuda | cuda:N, got '" + std::string(s) + "'");
}

std::string to_string(DeviceSpec d) {
  switch (d.kind) {
    case DeviceSpec::Kind::kAuto: return "auto";
    case DeviceSpec::Kind::kCpu: return "cpu";
    case DeviceSpec::Kind::kCuda: return d.index < 0 ? "cuda" : "cuda:" + std::to_string(d.index);
  }
  return "?";
}

}  // namespace lm::util
