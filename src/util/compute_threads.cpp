// util/threads.h's one LibTorch-dependent function, apart so threads.cpp stays free of LibTorch (it is part
// of lmtrain_base, which the small `lmtrain` front executable links; docs/ARCHITECTURE.md "Two executables").
#include "util/threads.h"

#include <dlfcn.h>
#include <torch/torch.h>

namespace lm::util {

void set_compute_threads(int torch_threads, int blas_threads) {
  torch::set_num_threads(torch_threads);
  // Look the setter up at run time so the build does not depend on which BLAS Debian's alternatives chose.
  using SetFn = void (*)(int);
  if (auto fn = reinterpret_cast<SetFn>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) fn(blas_threads);
}

}  // namespace lm::util
