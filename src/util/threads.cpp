#include "util/threads.h"

#include <dlfcn.h>
#include <torch/torch.h>

#include <algorithm>
#include <thread>

namespace lm::util {

void set_compute_threads(int torch_threads, int blas_threads) {
  torch::set_num_threads(torch_threads);
  // Look the setter up at run time so the build does not depend on which BLAS Debian's alternatives chose.
  using SetFn = void (*)(int);
  if (auto fn = reinterpret_cast<SetFn>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) fn(blas_threads);
}

int resolve_blas_threads(int configured, int processes) {
  if (configured > 0) return configured;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, cores / std::max(1, processes));
}

int blas_threads() {
  using GetFn = int (*)();
  auto fn = reinterpret_cast<GetFn>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
  return fn ? fn() : 0;
}

}  // namespace lm::util
