// Learning-rate schedule: linear warmup to train.lr, then cosine decay to train.min_lr at max_steps
// (Loshchilov & Hutter 2017, without restarts). A pure function of the step, so resume needs no state.
#pragma once

#include <cstdint>

#include "train/train_config.h"

namespace lm::train {

/// Learning rate for 0-based optimizer step `step`: lr*(step+1)/warmup during warmup, then
/// min_lr + (lr-min_lr)*(1+cos(pi*p))/2 with p = (step-warmup)/(max_steps-warmup) in [0, 1].
double lr_at(int64_t step, const TrainConfig& c);

}  // namespace lm::train
