// Data-parallel gradient averaging: the trainable parameters' gradients packed into flat buckets, each
// bucket summed over the ranks with one all-reduce and divided by the world size. With overlap on, a
// bucket's all-reduce starts from an autograd hook as soon as the backward pass has produced all of its
// gradients, so communication runs while the rest of the backward pass computes. Frozen parameters are
// left out. docs/ARCHITECTURE.md "More than one process".
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "dist/group.h"

namespace lm::dist {

class GradSync {
 public:
  /// Buckets `params` (those with requires_grad) in reverse order, about group.config().bucket_mb MiB
  /// each, and registers one gradient hook per parameter. REQUIRES: the same parameters, in the same
  /// order, on every rank; `group` and the parameters outlive this object.
  GradSync(Group& group, const std::vector<torch::Tensor>& params);
  ~GradSync();
  GradSync(const GradSync&) = delete;
  GradSync& operator=(const GradSync&) = delete;

  /// The next backward pass is the last of this optimizer step (the last micro-batch): its hooks start the
  /// all-reduces. Earlier micro-batches only accumulate locally.
  void arm();
  /// After that backward pass: starts what the hooks did not, waits for every bucket, and writes the
  /// average over ranks into each parameter's .grad. Returns the seconds spent waiting here (the
  /// communication the backward pass did not hide). Throws DistributedError.
  double finish();

  size_t buckets() const { return buckets_.size(); }

 private:
  struct Slot {
    torch::Tensor param;
    size_t bucket = 0;
    int64_t offset = 0;   ///< first element in its bucket's flat buffer
    torch::Tensor grad;   ///< the param-shaped view of the flat buffer at `offset`
    bool seen = false;    ///< its hook ran in the armed backward pass
  };
  struct Bucket {
    torch::Tensor flat;  ///< (numel,) gradients of its parameters, back to back
    int64_t numel = 0;
    size_t expected = 0, ready = 0;
    c10::intrusive_ptr<c10d::Work> work;
  };
  void on_grad(size_t slot, const torch::Tensor& grad);
  void launch(Bucket& b);

  Group& group_;
  std::vector<Slot> slots_;
  std::vector<Bucket> buckets_;
  std::vector<unsigned> hook_ids_;
  bool armed_ = false;
};

}  // namespace lm::dist
