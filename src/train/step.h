// The forward/backward half of one optimizer step, with gradient accumulation over micro-batches.
#pragma once

#include <cstdint>

#include "data/batcher.h"
#include "model/gpt.h"

namespace lm::train {

/// Zeroes the gradients, then runs `accum` micro-batches from `batcher` forward and backward, each loss
/// scaled by 1/accum, so the gradients equal those of one batch of accum x B sequences (the batcher's
/// windows for micro-batches k*accum.. are exactly those of one big batch k). Returns the mean loss.
double accumulate_gradients(model::GptImpl& model, data::Batcher& batcher, int64_t accum);

}  // namespace lm::train
