// Where a run starts: choosing the checkpoint to resume (`--resume auto|PATH`), the preflight that runs
// before any tensor is loaded (a different architecture, tokenizer or data is an error naming the field,
// checkpoint vs config), and a fresh start's refusal to replace an earlier run unless --overwrite.
#pragma once

#include <filesystem>
#include <string>

#include "checkpoint/checkpoint.h"
#include "data/split.h"
#include "train/train_job.h"

namespace lm::train {

/// Where `--resume` says a run starts: fresh, from the newest checkpoint of its run directory, or from a
/// named checkpoint or run directory.
struct ResumeSpec {
  enum class Kind { kFresh, kAuto, kPath };
  Kind kind = Kind::kFresh;
  std::filesystem::path path;  ///< kPath only
  /// The command-line value: "" (fresh), "auto", or a path.
  static ResumeSpec parse(const std::string& arg);
};

/// The checkpoint to resume from, or an empty path to start fresh.
/// kFresh = fresh; kAuto = newest verifying checkpoint in run_dir (invalid ones are warned about and
/// skipped, stale *.tmp-* directories removed with a warning; none at all = fresh; only invalid ones = a
/// CheckpointError unless kDelete, which starts fresh); kPath = a checkpoint or run directory, which must
/// verify. Throws CheckpointError.
std::filesystem::path select_resume_checkpoint(const std::filesystem::path& run_dir, const ResumeSpec& spec,
                                               Overwrite overwrite = Overwrite::kRefuse);

/// Before anything is loaded. Resuming (job.resume_from set): compares the checkpoint's arch.json and
/// recorded data with the job; throws CheckpointError listing every mismatch as "key: checkpoint X vs
/// config Y". Starting fresh in a run_dir that holds checkpoints: throws ConfigError, or with
/// job.overwrite deletes them (and `best`, `latest`) with a warning. `split` (when job.split is set) holds the
/// texts the run will write as job.train_files and job.val_files: a resume compares their hashes, not those of
/// the files an earlier start left there.
void check_run_start(const TrainJob& job, const data::CorpusSplit* split = nullptr);

/// After the run's tokenizer and token files are ready: they must be the ones the checkpoint used.
void check_data_identity(const checkpoint::DataIdentity& saved, const checkpoint::DataIdentity& now);

}  // namespace lm::train
