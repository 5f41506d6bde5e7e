// From a RunConfig to a run: the TrainJob that `train` and `finetune` hand to the trainer, and the
// dry run of `train --dry-run`. Internal to cli/.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "train/resume.h"
#include "train/train_job.h"
#include "util/run_lock.h"

namespace lm::dist {
class Group;
}

namespace lm::cli {

/// The TrainJob of a config (cmd_train.cpp). The `resume` spec is resolved to a checkpoint once, here (by
/// rank 0 of a group, which tells the others), and changed non-architectural settings are warned about.
train::TrainJob make_train_job(const config::RunConfig& cfg, const std::string& yaml, train::Overwrite overwrite,
                               const train::ResumeSpec& resume, dist::Group* group);

/// True, after saying "nothing to do" (rank 0), when the job resumes a checkpoint that already reached
/// train.max_steps (or stopped early) and metrics.jsonl records its final validation: no checkpoint, config
/// or metrics are written (choosing the checkpoint may have repaired a stale `latest`). cmd_train.cpp.
bool already_finished(const train::TrainJob& job, bool root);

/// Records argv, so `--nproc` can start the same command as its ranks (app.cpp calls it first).
void set_command_line(int argc, char** argv);

/// One `train`/`finetune` process in its run (run_process.cpp): with the launch variables of a group of
/// more than one process, it joins the group (dist.* settings) and names its rank in the log; rank 0 (or
/// the only process) locks run.dir. Throws DistributedError, ConfigError (run.dir in use).
class RunProcess {
 public:
  explicit RunProcess(const config::RunConfig& cfg);
  ~RunProcess();
  dist::Group* group() const { return group_.get(); }
  bool is_root() const;
  /// After a successful run: leaves the group cleanly.
  void finish();

 private:
  std::unique_ptr<dist::Group> group_;
  std::unique_ptr<util::RunLock> lock_;
};

/// `--nproc N`: runs this same command (argv without --nproc) as N ranks on this machine and waits; a
/// non-zero common exit code is thrown as the matching error. Throws ConfigError when a launcher already
/// set WORLD_SIZE.
void launch_local_ranks(int nproc, const config::RunConfig& cfg);

/// `train --dry-run`: one batch through a freshly initialised model of `cfg`, stage by stage; writes
/// nothing (cmd_inspect_model.cpp).
void run_dry_run(const config::RunConfig& cfg);

}  // namespace lm::cli
