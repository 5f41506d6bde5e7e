#include "util/threads.h"

#include <dlfcn.h>
#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

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

std::string blas_core() {
  using NameFn = char* (*)();
  auto fn = reinterpret_cast<NameFn>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  const char* name = fn ? fn() : nullptr;
  return name ? name : "";
}

}  // namespace lm::util
