// AdamW's step in one pass over every parameter (with the fused set of operations): the same update as
// torch::optim::AdamW::step, on the same state (so checkpoints, resume and the reference set's step are unchanged),
// but each element read and written once, on all of LibTorch's threads, instead of about ten LibTorch ops
// per parameter tensor, each a pass over memory (docs/ARCHITECTURE.md "Threads and memory").
#pragma once

#include <torch/torch.h>

namespace lm::train {

/// Steps `opt` as opt.step() would after every gradient was multiplied by `grad_scale` (gradient
/// clipping's factor; the gradients themselves are left as they are), up to float rounding (the same
/// formula, evaluated per element), when every parameter with a gradient is a contiguous CPU float32 tensor
/// with a dense contiguous float32 gradient, every existing state tensor is contiguous CPU float32, and no
/// group uses amsgrad. Returns false and changes nothing otherwise.
bool fused_adamw_step(torch::optim::AdamW& opt, float grad_scale = 1.0f);

}  // namespace lm::train
