// The forward/backward half of one optimizer step, with gradient accumulation over micro-batches.
#pragma once

#include <cstdint>
#include <functional>

#include "data/batcher.h"
#include "model/gpt.h"

namespace lm::train {

/// Resets the gradients to none (undefined), then runs `accum` micro-batches from `batcher` forward and backward, each loss
/// scaled by 1/accum, so the gradients equal those of one batch of accum x B sequences (the batcher's
/// windows for micro-batches k*accum.. are exactly those of one big batch k). `before_last` runs right
/// before the last micro-batch's backward pass (a multi-process run starts its all-reduces from there).
/// Returns the mean loss.
double accumulate_gradients(model::GptImpl& model, data::Batcher& batcher, int64_t accum,
                            const std::function<void()>& before_last = {});

}  // namespace lm::train
