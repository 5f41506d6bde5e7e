// The training loop: AdamW with warmup + cosine lr, gradient clipping, the non-finite guard, periodic
// validation, early stopping and checkpoints, a graceful stop on SIGINT/SIGTERM, and the final full
// validation. The run's data comes from run_data.h, where it starts from resume.h, freezing from
// finetune.h.
#pragma once

#include "train/train_job.h"

namespace lm::train {

/// Runs (or resumes, from job.resume_from) the job to max_steps or early stop. On SIGINT/SIGTERM it
/// finishes the step, saves, and throws Interrupted. Throws DataError, CheckpointError, NonFiniteError,
/// SaveError, ...
TrainResult run_training(const TrainJob& job);

}  // namespace lm::train
