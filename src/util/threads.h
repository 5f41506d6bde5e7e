// Compute-thread control: LibTorch intra-op threads and OpenBLAS threads, set together so they never
// oversubscribe the cores (measured: oversubscription roughly halves training speed; see
// docs/ARCHITECTURE.md "Threads and memory").
#pragma once

namespace lm::util {

/// Sets LibTorch's intra-op threads to `n` and OpenBLAS's threads to `n` (when OpenBLAS is loaded).
/// REQUIRES: n >= 1.
void set_compute_threads(int n);

}  // namespace lm::util
