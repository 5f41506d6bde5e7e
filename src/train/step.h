// The forward/backward half of one optimizer step, with gradient accumulation over micro-batches.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <vector>

#include "data/batcher.h"
#include "model/gpt.h"
#include "train/train_config.h"

namespace lm::train {

/// Resets the gradients to none (undefined), then runs `accum` micro-batches from `batcher` forward and backward, each loss
/// scaled by 1/accum, so the gradients equal those of one batch of accum x B sequences (the batcher's
/// windows for micro-batches k*accum.. are exactly those of one big batch k). `before_last` runs right
/// before the last micro-batch's backward pass (a multi-process run starts its all-reduces from there).
/// Returns the mean loss.
double accumulate_gradients(model::GptImpl& model, data::Batcher& batcher, int64_t accum,
                            const std::function<void()>& before_last = {});

/// Test builds (util/faults.h), after the backward pass of step `step`: a NaN fault poisons the loss and every
/// gradient (what a diverged step looks like; returns NaN), an Inf fault sets one gradient element to Inf
/// (the loss stays finite). Returns `loss` otherwise.
double inject_faults(std::vector<torch::Tensor>& params, int64_t step, int rank, double loss);

/// A non-finite loss or gradient norm at step `step` (no update was made): throws NonFiniteError, naming
/// `last_ckpt`, under on_nonfinite stop or after cfg.max_skips skips in a row; else counts the skip in
/// `consecutive_skips` and warns.
void skip_or_stop(double loss, double grad_norm, int64_t step, const TrainConfig& cfg, int64_t& consecutive_skips,
                  const std::filesystem::path& last_ckpt);

}  // namespace lm::train
