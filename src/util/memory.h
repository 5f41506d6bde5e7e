// Allocator tuning for training-sized tensors on glibc.
#pragma once

namespace lm::util {

/// Makes glibc malloc keep freed memory for reuse: allocations up to 128 MiB (the loss head's logits block,
/// 64 MiB at config S, included; 32 MiB on a glibc older than bookworm's) come from the main thread's heap
/// and the heap is not trimmed back to the OS. Without this, every step re-faults its
/// activation memory page by page, which measured several times slower than the arithmetic here.
void keep_freed_memory();

}  // namespace lm::util
