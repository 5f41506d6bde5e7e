#include "util/threads.h"

#include <dlfcn.h>
#include <sched.h>
#include <strings.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace lm::util {

int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

int resolve_blas_threads(int configured, int processes) {
  if (configured > 0) return configured;
  if (const char* local = std::getenv("LOCAL_WORLD_SIZE")) {
    char* end = nullptr;
    const long n = std::strtol(local, &end, 10);
    if (end != local && *end == '\0' && n > 0 && n <= 1 << 20) processes = static_cast<int>(n);
  }
  return std::max(1, usable_cores() / std::max(1, processes));
}

int blas_threads() {
  using GetFn = int (*)();
  auto fn = reinterpret_cast<GetFn>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
  return fn ? fn() : 0;
}

std::string preferred_blas_core(const std::string& vendor, bool avx512) {
  return vendor == "AuthenticAMD" && avx512 ? "SKYLAKEX" : "";
}

std::string blas_core_to_set() {
  if (const char* set = std::getenv("OPENBLAS_CORETYPE"); set && *set) return "";
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(0, &a, &b, &c, &d)) return "";
  char vendor[13] = {};
  std::memcpy(vendor, &b, 4);
  std::memcpy(vendor + 4, &d, 4);
  std::memcpy(vendor + 8, &c, 4);
  // __builtin_cpu_supports also checks that the operating system saves the AVX-512 registers (XCR0).
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
                      __builtin_cpu_supports("avx512vl");
  return preferred_blas_core(vendor, avx512);
#else
  return "";
#endif
}

bool set_blas_core() {
  const std::string core = blas_core_to_set();
  return !core.empty() && ::setenv("OPENBLAS_CORETYPE", core.c_str(), /*overwrite=*/0) == 0;
}

std::string blas_core() {
  using NameFn = char* (*)();
  auto fn = reinterpret_cast<NameFn>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  const char* name = fn ? fn() : nullptr;
  return name ? name : "";
}

void restart_for_blas_core(char** argv) {
  const std::string want = blas_core_to_set(), have = blas_core();
  if (want.empty() || have.empty() || ::strcasecmp(want.c_str(), have.c_str()) == 0 || !set_blas_core()) return;
  ::execv("/proc/self/exe", argv);
}

}  // namespace lm::util
