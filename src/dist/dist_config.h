// DistConfig: the YAML section `dist` of a multi-process run (docs/ARCHITECTURE.md "More than one process").
// A single-process run ignores it.
#pragma once

#include <cstdint>

namespace lm::dist {

struct DistConfig {
  /// Seconds within which a rank that died or never joined ends the others with exit code 7; it also
  /// bounds one collective (a save or slow data preparation on rank 0 is waited for without it).
  int64_t timeout_s = 60;
  /// Gradient all-reduce bucket size in MiB: parameters are packed into buckets of about this size, in
  /// reverse order of the forward pass, and each bucket is reduced as one flat tensor.
  int64_t bucket_mb = 25;
  /// Launch a bucket's all-reduce from the backward pass as soon as its gradients are complete (true), or
  /// all of them after the backward pass (false; the communication cost then shows in full).
  bool overlap = true;
};

}  // namespace lm::dist
