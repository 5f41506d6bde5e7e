// Holding out validation text from one training file: whole lines, in a few contiguous blocks spread over
// the file, placed by the run's seed. A run with only `data.train` set validates on lines it never trains on,
// and never on the immediate neighbours of lines it memorised (a block is long, not scattered single lines).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace lm::data {

/// What to hold out: `fraction` of the lines of `source`, placed by `seed`.
struct SplitSpec {
  std::filesystem::path source;
  double fraction = 0.05;  ///< REQUIRES: in (0, 0.5]
  uint64_t seed = 0;
};

/// Lines [begin, end) of the source, counted from 0.
struct LineRange {
  int64_t begin = 0, end = 0;
};

/// The two texts of a split (each line ends in '\n'), and which lines went where.
struct CorpusSplit {
  std::string train, val;
  std::string train_sha256, val_sha256;  ///< of the two texts: what a checkpoint records and a resume compares
  std::vector<LineRange> held_out;  ///< the validation blocks, in file order
  int64_t lines = 0;                ///< lines of the source
  int64_t val_lines = 0;            ///< lines held out
  std::string source_sha256;
};

/// Reads `spec.source` and splits it. The number of lines held out is round(fraction × lines), at least 1;
/// they form K = clamp(held_out / 25, 1, 16) blocks, one inside each K-th of the file at an offset drawn
/// from `spec.seed`, so the same file, fraction and seed give the same split on every machine.
/// Throws DataError when the source cannot be read or has fewer than 2 lines; ConfigError when fraction is
/// outside (0, 0.5].
CorpusSplit split_corpus(const SplitSpec& spec);

/// The files of a many-file corpus split into training and validation files (each list in corpus order).
struct FileSplit {
  std::vector<std::filesystem::path> train, val;
};

/// Holds out whole files of a corpus of two or more: round(fraction × files), at least 1 and at most all but
/// one, chosen by `seed`, so the same files, fraction and seed give the same split everywhere.
/// REQUIRES: files.size() >= 2, fraction in (0, 0.5].
FileSplit hold_out_files(const std::vector<std::filesystem::path>& files, double fraction, uint64_t seed);

/// One line for the log: "held out 34 of 674 lines (5.0%) of 'my.txt' as validation, 1 block: lines 301-334".
std::string describe_split(const CorpusSplit& split, const std::filesystem::path& source);

/// Writes the two texts to `train_out` and `val_out` (atomically each), leaving a file alone when it already
/// holds those bytes. Throws SaveError.
void write_split(const CorpusSplit& split, const std::filesystem::path& train_out, const std::filesystem::path& val_out);

}  // namespace lm::data
