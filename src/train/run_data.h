// The data of a run directory: its tokenizer (trained, or copied from the fine-tune's checkpoint) and its
// token files, made when missing or stale, and opened with the identity a resume must match.
#pragma once

#include <filesystem>

#include "checkpoint/checkpoint.h"
#include "data/token_file.h"
#include "tokenizer/extend.h"
#include "tokenizer/tokenizer.h"
#include "train/train_job.h"

namespace lm::train {

/// Paths of the artefacts inside a run directory.
struct RunPaths {
  explicit RunPaths(const std::filesystem::path& dir)
      : tokenizer(dir / "tokenizer.model"), train_bin(dir / "train.bin"), val_bin(dir / "val.bin") {}
  std::filesystem::path tokenizer, train_bin, val_bin;
};

/// Makes the tokenizer and token files of a run when missing or stale (logged). Safe to call repeatedly.
/// Throws DataError; Interrupted when SIGINT/SIGTERM arrived meanwhile (nothing trained yet, finished
/// files are kept).
void prepare_run_data(const TrainJob& job);

/// data.unit paragraph: writes each of job.paragraph_copies (the corpus file read and checked as a corpus,
/// its blank-line-separated blocks joined: data/paragraphs.h), logged. With data.unit line, warns when the
/// first training file looks hard-wrapped, naming data.unit. Throws DataError (a corpus problem, named at its
/// own file, line and column), SaveError.
void prepare_run_text(const TrainJob& job);

/// The run's tokenizer and token files, opened, with the identity of tokenizer and corpus that checkpoints
/// record. Throws DataError.
struct RunData {
  explicit RunData(const std::filesystem::path& run_dir);
  RunPaths paths;
  tokenizer::Tokenizer tokenizer;
  data::TokenFile train, val;
  checkpoint::DataIdentity identity;
  tokenizer::Extension extension;  ///< the pieces the run's tokenizer added to its checkpoint's (old_vocab 0: none)
  std::filesystem::path extension_file;  ///< its sidecar, which checkpoints carry (empty: none)
};

/// The job's run data, its identity naming a contrastive fine-tune's pairs too (contrastive.h pairs_identity).
RunData run_data(const TrainJob& job);

}  // namespace lm::train
