// Resume: choosing the checkpoint (`--resume auto|PATH`) and the preflight that runs before any tensor is
// loaded: a different architecture, tokenizer or data is an error naming the field (checkpoint vs config).
#pragma once

#include <filesystem>
#include <string>

#include "checkpoint/checkpoint.h"
#include "tokenizer/tokenizer.h"

namespace lm::train {

struct TrainJob;

/// The checkpoint to resume from, or an empty path to start fresh.
/// spec "" = fresh; "auto" = newest verifying checkpoint in job.run_dir (invalid ones are warned about and
/// skipped, stale *.tmp-* directories removed with a warning; none at all = fresh; only invalid ones = a
/// CheckpointError unless `overwrite`, which starts fresh); else a checkpoint or run directory, which must
/// verify. Throws CheckpointError.
std::filesystem::path select_resume_checkpoint(const std::filesystem::path& run_dir, const std::string& spec,
                                               bool overwrite = false);

/// Compares the checkpoint's arch.json and recorded data with the job, before anything is loaded.
/// Throws CheckpointError listing every mismatch as "key: checkpoint X vs config Y".
void preflight_resume(const TrainJob& job, const std::filesystem::path& ckpt);

/// After the run's tokenizer and token files are ready: they must be the ones the checkpoint used.
void check_data_identity(const checkpoint::DataIdentity& saved, const checkpoint::DataIdentity& now);

}  // namespace lm::train
