// The bf16 copies of a model's fp32 master weights that bf16 products read (the fused set's, model/fused/):
// made once per optimizer step, on first use, and reused by every micro-batch and by backward. The
// optimizer step says when the weights changed (weights_changed()); nothing is keyed on tensor versions.
#pragma once

#include <ATen/core/Tensor.h>

#include <unordered_map>
#include <utility>

namespace lm::model {

class WeightCopies {
 public:
  /// The bf16 copy of `w` (a parameter: its identity, not its contents, finds the copy), made now if none
  /// was made since the last weights_changed(). Not thread-safe: the model's forward calls it.
  const at::Tensor& of(const at::Tensor& w);
  /// Every copy is stale: the next of() makes it again. The optimizer calls this after each step (and
  /// anyone else who writes the weights in place).
  void weights_changed() { copies_.clear(); }
  /// How many copies exist now (tests).
  size_t size() const { return copies_.size(); }

 private:
  /// By the parameter's TensorImpl: the parameter itself (held, so its address is never another's while
  /// listed) and its copy.
  std::unordered_map<const void*, std::pair<at::Tensor, at::Tensor>> copies_;
};

}  // namespace lm::model
