#include "util/blas_kernels.h"

#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "util/threads.h"

namespace lm::util {

namespace {

// The record of a decision, in the environment of the process and its children:
// "chosen:SET:OWN" (the rule set OPENBLAS_CORETYPE=SET; OpenBLAS alone would run OWN), "user:SET" (the
// user's variable), "own:" (OpenBLAS's own choice kept).
constexpr const char* kRecord = "LMTRAIN_BLAS_KERNELS";
constexpr const char* kCoreType = "OPENBLAS_CORETYPE";

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// The value OPENBLAS_CORETYPE had when the record was written ("" when unset).
std::string recorded_set(const std::string& record) {
  if (record.rfind("chosen:", 0) == 0) return record.substr(7, record.find(':', 7) - 7);
  if (record.rfind("user:", 0) == 0) return record.substr(5);
  return "";
}

// True when the environment holds a record that matches its OPENBLAS_CORETYPE.
bool recorded() {
  const char* record = std::getenv(kRecord);
  return record != nullptr && recorded_set(record) == env_or_empty(kCoreType);
}

// Applies `choice` to the environment and records it (own: OpenBLAS's own choice).
void apply(const BlasKernelChoice& choice, std::string_view own, bool user) {
  std::string record = "own:";
  if (user) {
    record = "user:" + env_or_empty(kCoreType);
  } else if (!choice.set.empty()) {
    ::setenv(kCoreType, choice.set.c_str(), 1);
    record = "chosen:" + choice.set + ":" + std::string(own);
  }
  ::setenv(kRecord, record.c_str(), 1);
}

}  // namespace

VectorClass class_of_core(std::string_view core) {
  const std::string c = lower(core);
  if (c == "skylakex" || c == "cooperlake" || c == "sapphirerapids") return VectorClass::kAvx512;
  if (c == "haswell" || c == "zen") return VectorClass::kAvx2;
  if (c == "sandybridge" || c == "bulldozer" || c == "piledriver" || c == "steamroller" || c == "excavator") {
    return VectorClass::kAvx;
  }
  return VectorClass::kOther;
}

VectorClass cpu_vector_class() {
#if defined(__x86_64__) || defined(__i386__)
  // gcc's checks include the OS's support for the registers (XGETBV).
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl")) {
    return VectorClass::kAvx512;
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return VectorClass::kAvx2;
#endif
  return VectorClass::kOther;
}

BlasKernelChoice choose_blas_kernels(VectorClass cpu, std::string_view own, const char* user) {
  if (user != nullptr) return {"", "OPENBLAS_CORETYPE from the environment"};
  if (own.empty()) return {"", ""};
  const char* widest = cpu == VectorClass::kAvx512 ? "SkylakeX" : cpu == VectorClass::kAvx2 ? "Haswell" : nullptr;
  if (widest != nullptr && class_of_core(own) < cpu) {
    return {widest, "chosen for this CPU; this OpenBLAS would run " + std::string(own) + "'s"};
  }
  return {"", "OpenBLAS's own choice for this CPU"};
}

void choose_blas_kernels_before_loading() {
  if (recorded()) return;
  const char* user = std::getenv(kCoreType);
  std::string own;
  if (user == nullptr) {
    // The BLAS LibTorch links (Debian's alternatives pick OpenBLAS); loaded here only to ask it, in a
    // process that is about to exec. Not OpenBLAS (no openblas_get_corename): nothing to choose.
    if (void* blas = ::dlopen("libblas.so.3", RTLD_NOW | RTLD_LOCAL)) {
      using NameFn = char* (*)();
      if (auto fn = reinterpret_cast<NameFn>(::dlsym(blas, "openblas_get_corename"))) {
        const char* name = fn();
        own = name ? name : "";
      }
    }
    if (own.empty()) return;
  }
  apply(choose_blas_kernels(cpu_vector_class(), own, user), own, user != nullptr);
}

bool blas_kernels_need_restart() {
  if (recorded()) return false;
  const std::string own = blas_core();  // loaded with this process
  if (own.empty()) return false;
  const char* user = std::getenv(kCoreType);
  const BlasKernelChoice choice = choose_blas_kernels(cpu_vector_class(), own, user);
  apply(choice, own, user != nullptr);
  return !choice.set.empty();
}

std::string describe_blas_kernels() {
  const std::string core = blas_core();
  if (core.empty()) return "";
  const std::string record = recorded() ? env_or_empty(kRecord) : "";
  if (record.rfind("chosen:", 0) == 0) {
    const std::string set = recorded_set(record);
    const size_t colon = record.find(':', 7);
    const std::string own = colon == std::string::npos ? "?" : record.substr(colon + 1);
    if (class_of_core(core) != class_of_core(set)) return core + " (OPENBLAS_CORETYPE=" + set + " was not taken)";
    return core + " (chosen for this CPU; this OpenBLAS would run " + own + "'s)";
  }
  if (std::getenv(kCoreType) != nullptr) return core + " (OPENBLAS_CORETYPE from the environment)";
  return core + " (OpenBLAS's own choice for this CPU)";
}

}  // namespace lm::util
