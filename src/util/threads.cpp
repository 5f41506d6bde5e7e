#include "util/threads.h"

#include <dlfcn.h>
#include <torch/torch.h>

namespace lm::util {

void set_compute_threads(int n) {
  torch::set_num_threads(n);
  // OpenBLAS keeps its own pool; LibTorch does not always forward the count to it. Look the setter up at
  // run time so the build does not depend on which BLAS Debian's alternatives chose.
  using SetFn = void (*)(int);
  if (auto fn = reinterpret_cast<SetFn>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) fn(n);
}

}  // namespace lm::util
