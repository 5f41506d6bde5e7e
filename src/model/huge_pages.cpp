// pack_parameters_in_huge_pages: every parameter moved into one 2 MiB-aligned block advised for
// transparent huge pages, so incremental decoding streams the weights without page-boundary stalls.
#include "model/huge_pages.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstring>
#include <memory>

namespace lm::model {

void pack_parameters_in_huge_pages(torch::nn::Module& m) {
  constexpr size_t kHuge = size_t{2} << 20, kAlign = 64;
  auto params = m.parameters(/*recurse=*/true);
  size_t total = 0;
  for (auto& p : params) total += (p.nbytes() + kAlign - 1) / kAlign * kAlign;
  total = (total + kHuge - 1) / kHuge * kHuge;
  // A fresh mapping (malloc would hand back memory already faulted in 4 KiB pages), aligned to 2 MiB by
  // over-allocating, advised before the first touch so the copy below faults in huge pages.
  const size_t mapped = total + kHuge;
  void* map = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (total == 0 || map == MAP_FAILED) return;  // keep the tensors as they are
  std::shared_ptr<void> buffer(map, [mapped](void* q) { munmap(q, mapped); });
  void* raw = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(map) + kHuge - 1) / kHuge * kHuge);
  madvise(raw, total, MADV_HUGEPAGE);  // advice only: without THP the weights are still one block
  torch::NoGradGuard no_grad;
  size_t offset = 0;
  for (auto& p : params) {
    if (!p.is_contiguous() || p.device() != torch::kCPU) continue;
    char* at = static_cast<char*>(raw) + offset;
    std::memcpy(at, p.data_ptr(), p.nbytes());
    auto packed = torch::from_blob(at, p.sizes(), [buffer](void*) {}, p.options());
    p.set_(packed);
    offset += (p.nbytes() + kAlign - 1) / kAlign * kAlign;
  }
}

}  // namespace lm::model
