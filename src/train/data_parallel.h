// The trainer's side of a multi-process run, in one place: rank 0's weights broadcast at the start,
// gradients averaged over ranks (dist::GradSync), one agreement per step on the loss and on stop signals,
// and the check that every rank holds the same weights. With no process group every call is the
// single-process behaviour, so the trainer has one code path. docs/ARCHITECTURE.md "More than one process".
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dist/grad_sync.h"
#include "dist/group.h"
#include "model/gpt.h"

namespace lm::train {

/// What the ranks agreed on after a step's backward pass.
struct StepAgreement {
  double loss = 0.0;         ///< mean training loss over every rank's sequences
  double comm_seconds = 0.0; ///< waiting for gradient all-reduces after the backward pass
};

class DataParallel {
 public:
  /// `group` may be null (one process). With a group: copies rank 0's parameters to every rank and hooks
  /// the trainable ones for gradient averaging. REQUIRES: `model` outlives this object.
  DataParallel(dist::Group* group, model::GptImpl& model);

  bool active() const { return group_ != nullptr; }
  int rank() const { return group_ ? group_->rank() : 0; }
  int world_size() const { return group_ ? group_->size() : 1; }
  bool is_root() const { return !group_ || group_->is_root(); }
  dist::Group* group() const { return group_; }

  /// Call right before the last micro-batch's backward pass of each step.
  void before_last_backward();
  /// After the backward passes: averages the gradients, agrees on the loss and on stop signals.
  StepAgreement after_backward(double local_loss);
  /// The stop signal to act on at the end of a step: SIGTERM if any rank had one at the last agreement,
  /// else SIGINT if any did, else 0. One process: the signal received so far (util::stop_signal).
  int stop_signal() const;
  /// The set of trainable parameters changed (a fine-tune unfroze the embeddings): hook them anew.
  void retrack();

  /// Rank 0 runs `fn`; the others wait for it and rethrow its error (dist::Group::on_root). Without a
  /// group, just `fn`.
  void on_root(const std::string& key, const std::function<void()>& fn);
  /// Throws DistributedError unless every rank holds bit-identical weights; logs the digest on rank 0.
  void check_replicas(const std::string& when);

 private:
  dist::Group* group_;
  model::GptImpl& model_;
  std::unique_ptr<dist::GradSync> sync_;
  int agreed_signal_ = 0;
};

}  // namespace lm::train
