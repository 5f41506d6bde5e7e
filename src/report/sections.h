// The report's sections as JSON for the page (report.cpp gathers the sources, report_page.cpp embeds
// the result). Internal to report/.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "config/config.h"
#include "tokenizer/tokenizer.h"

namespace lm::report {

/// What every section reads: the checkpoint, its run directory and the counts of each id in the
/// training data (the run's train.bin; empty when it is missing or made with another tokenizer).
struct Sources {
  checkpoint::LoadedCheckpoint ck;
  std::filesystem::path run_dir;
  std::optional<tokenizer::Tokenizer> tok;
  std::vector<int64_t> counts;
  std::string counts_source;  ///< e.g. "runs/x/train.bin", or why there are no counts
  std::optional<config::RunConfig> cfg;  ///< the checkpoint's config.yaml; empty when this version cannot read it
};

/// x rounded to `digits` significant digits, so the page stays small (NaN/inf -> null).
nlohmann::json rounded(double x, int digits = 5);

/// RUN/metrics.jsonl as columns: train {step, loss, lr, tokens_per_s}, val and full {step, loss, bpb},
/// segments [{kind: start|resume, step}], wall_s (null without timestamps). Empty arrays without a file.
nlohmann::json curves_section(const std::filesystem::path& run_dir);
/// Config, parameter counts, table arithmetic, data sizes, tokens seen, wall time, final validation.
nlohmann::json summary_section(const Sources& s, const nlohmann::json& curves);
/// PCA of the token rows of the `points` most frequent pieces, their counts and cosine neighbours.
nlohmann::json map_section(const Sources& s, int points, int neighbours);
/// Cosine similarity between positions (at most 128, evenly spaced) and row norms of both tables.
nlohmann::json positions_section(const Sources& s, const std::vector<int32_t>& map_ids);
/// Per-row drift from `base`, the most moved pieces, the SHA-256 of every tensor in both, the run's
/// forgetting.json when there is one.
nlohmann::json drift_section(const Sources& s, const checkpoint::LoadedCheckpoint& base, int top_k);

/// The run's sentence_vectors.json (a contrastive fine-tune's retrieval and cosines before and after), or null.
nlohmann::json sentences_section(const Sources& s);
/// The teacher-forced next-token table of `prompt` (inspect probs).
nlohmann::json probs_section(const Sources& s, const std::string& prompt, int top_k);
/// One piece in several texts through the depths: cosine between occurrences and the logit lens (inspect
/// context), for `piece` or else the first piece the texts share.
nlohmann::json context_section(const Sources& s, const std::vector<std::string>& texts, const std::string& piece, int top_k);

/// The whole HTML page around `data`.
std::string render_page(const nlohmann::json& data);

}  // namespace lm::report
