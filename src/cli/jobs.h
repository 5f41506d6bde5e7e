// From a RunConfig to a run: the TrainJob that `train` and `finetune` hand to the trainer, and the
// dry run of `train --dry-run`. Internal to cli/.
#pragma once

#include <string>

#include "config/config.h"
#include "train/train_job.h"

namespace lm::cli {

/// The TrainJob of a config (cmd_train.cpp). A `resume` spec ("auto" or a path) is resolved to the
/// checkpoint once, here, and changed non-architectural settings are warned about.
train::TrainJob make_train_job(const config::RunConfig& cfg, const std::string& yaml, bool overwrite,
                               const std::string& resume);

/// `train --dry-run`: one batch through a freshly initialised model of `cfg`, stage by stage; writes
/// nothing (cmd_inspect_model.cpp).
void run_dry_run(const config::RunConfig& cfg);

}  // namespace lm::cli
