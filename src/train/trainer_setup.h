// What a Trainer is built from: the model of a job (fresh, or a fine-tune's starting weights), its AdamW,
// the state a resume restores, and the start-up summary in the log.
#pragma once

#include <torch/torch.h>

#include <memory>

#include "checkpoint/checkpoint.h"
#include "model/gpt.h"
#include "train/finetune.h"
#include "train/optimizer.h"
#include "train/run_data.h"
#include "train/train_job.h"
#include "util/device.h"

namespace lm::train {

/// A fresh model of the job's architecture computing with `ops` (model/make_ops.h), seeded and initialised
/// on the CPU so a seed gives the same weights on every device, with a fine-tune's starting weights when not
/// resuming, then moved to `device`.
model::Gpt build_model(const TrainJob& job, const RunData& data, const torch::Device& device, model::OpsPtr ops);

/// AdamW (and Muon) over the decay groups, logging the fine-tune's unfreeze plan and embedding lr scale;
/// `plan` is the run's (model/make_ops.h).
std::unique_ptr<RunOptimizer> build_optimizer(const TrainJob& job, const DecayGroups& groups, const Freezer& freezer,
                                              const model::ExecutionPlan& plan);

/// The trainer state to start from: a resumed run's (weights, optimizer state and RNG restored too), or a
/// fresh one. Either way it records the identity of this run's data.
checkpoint::TrainerState restore(const TrainJob& job, const RunData& data, model::GptImpl& model, RunOptimizer& opt);

/// Parameters, embedding share, decay groups, threads, device and the batch per step.
void log_model_summary(const model::GptImpl& m, const DecayGroups& g, const TrainJob& job, int world_size,
                       const model::ExecutionPlan& plan);

/// A run's precisions (run.precision, train.muon_precision): as set; under auto, a resume keeps the
/// precision its checkpoint trained in, and a new run measures (util::choose_precisions; products in bf16
/// only where the kernels that will run can multiply it) on rank 0, and every rank takes its answer, so
/// ranks and resumed runs never train in two precisions.
util::RunPrecisions run_precision(const TrainJob& job, const torch::Device& device);

/// The run's execution plan (model::make_ops) for its precisions and `cores`, Muon's precision in it.
model::ExecutionPlan run_plan(const TrainJob& job, const torch::Device& device, const util::RunPrecisions& precisions,
                              int cores);

}  // namespace lm::train
