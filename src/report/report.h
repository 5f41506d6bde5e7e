// `lmtrain report`: one self-contained HTML file about a run or a checkpoint: run summary, loss curves,
// the token table's embedding map, the positions, a fine-tune's drift, the next-token bars of a prompt and
// one piece's vectors through the depths in several texts (the context section).
// The numbers come from inspect/ (the code behind `inspect ...`); the page only draws them (assets/).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace lm::report {

struct ReportOptions {
  std::filesystem::path target;   ///< a run directory (its `latest`) or a checkpoint directory
  std::filesystem::path compare;  ///< optional: the checkpoint drift is measured from (default: a
                                  ///< fine-tune's `finetune.from`)
  std::string prompt;             ///< optional: text for the next-token bars
  std::vector<std::string> context_texts;  ///< optional (two or more): texts for the context section
  std::string context_piece;      ///< the piece it follows (default: the first one the texts share)
  std::filesystem::path output;   ///< default: RUN/report.html
  int points = 2000;              ///< most frequent pieces on the embedding map
  int neighbours = 10;            ///< nearest neighbours listed per piece
  int top_k = 5;                  ///< alternatives per position in the next-token bars
};

struct ReportResult {
  std::filesystem::path path;
  uint64_t bytes = 0;
  std::string drift_from;  ///< the checkpoint drift was measured from ("" = no drift section)
};

/// Gathers everything and writes the page atomically. Throws CheckpointError for a target or --compare
/// that is not a checkpoint (or another tokenizer or shape), ConfigError for bad options or an output
/// path that holds something other than an lmtrain report (never overwritten), SaveError when writing fails.
ReportResult write_report(const ReportOptions& options);

}  // namespace lm::report
