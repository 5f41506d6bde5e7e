#include "model/weight_copies.h"

#include <ATen/ATen.h>

namespace lm::model {

const at::Tensor& WeightCopies::of(const at::Tensor& w) {
  auto [it, fresh] = copies_.try_emplace(w.unsafeGetTensorImpl());
  if (fresh) it->second = {w, w.detach().to(at::kBFloat16).contiguous()};
  return it->second.second;
}

}  // namespace lm::model
