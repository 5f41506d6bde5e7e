#include "report/report.h"

#include <spdlog/spdlog.h>

#include <fstream>

#include "data/token_file.h"
#include "inspect/drift.h"
#include "report/sections.h"
#include "tokenizer/extend.h"
#include "util/errors.h"
#include "util/fs.h"
#include "util/hash.h"

namespace lm::report {
namespace fs = std::filesystem;

namespace {

constexpr const char* kGeneratorTag = "<meta name=\"generator\" content=\"lmtrain report\">";

// The run a checkpoint belongs to: the target itself when it is a run directory, else the checkpoint's
// parent when that is a run (it has `latest` or metrics.jsonl). A loose checkpoint is its own "run".
fs::path run_dir_of(const fs::path& target, const fs::path& ckpt) {
  if (fs::is_regular_file(target / "latest") && !fs::is_regular_file(target / "manifest.json")) return target;
  const fs::path parent = ckpt.parent_path();
  if (fs::is_regular_file(parent / "latest") || fs::is_regular_file(parent / "metrics.jsonl")) return parent;
  return ckpt;
}

fs::path default_output(const Sources& s) {
  if (s.run_dir != s.ck.dir) return s.run_dir / "report.html";
  return s.ck.dir.parent_path() / (s.ck.dir.filename().string() + ".report.html");  // never inside a checkpoint
}

// The report overwrites an earlier report, never anything else.
void check_output(const fs::path& out) {
  util::check_output_directory(out, "report", "-o");
  if (!fs::exists(out)) return;
  std::string head(4096, '\0');
  std::ifstream in(out, std::ios::binary);
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(in.gcount()));
  if (!fs::is_regular_file(out) || head.find(kGeneratorTag) == std::string::npos) {
    throw ConfigError("[report] -o: refusing to overwrite '" + out.string() +
                      "': it is not an lmtrain report. Hint: choose another file name.");
  }
}

void count_training_ids(Sources& s) {
  const fs::path bin = s.run_dir / "train.bin";
  if (!data::token_data_exists(bin)) {
    s.counts_source = "no train.bin in " + s.run_dir.string() + ": pieces by id, not by frequency";
    return;
  }
  try {
    if (data::read_token_file_info(bin).tokenizer_sha256 != s.tok->sha256()) {
      s.counts_source = bin.string() + " was made with another tokenizer: pieces by id, not by frequency";
      return;
    }
    s.counts = inspect::token_counts(bin.string(), s.ck.arch.vocab_size);
    s.counts_source = bin.string();
  } catch (const DataError& e) {  // the report is about the checkpoint: a damaged token file only loses the counts
    s.counts.clear();
    s.counts_source = std::string(e.what()) + ": pieces by id, not by frequency";
    spdlog::warn("[report] {}", e.what());
  }
}

// --compare, else a fine-tune's starting checkpoint (config finetune.from); a missing one is reported, not fatal.
std::optional<checkpoint::LoadedCheckpoint> drift_base(const Sources& s, const fs::path& compare, std::string& note) {
  std::optional<checkpoint::LoadedCheckpoint> base;
  if (!compare.empty()) {
    base = checkpoint::load_checkpoint(checkpoint::resolve_checkpoint(compare));
  } else if (s.cfg && !s.cfg->finetune.from.empty()) {
    const std::string from = s.cfg->finetune.from;
    try {  // load_checkpoint verifies: one pass over the files
      base = checkpoint::load_checkpoint(checkpoint::resolve_checkpoint(from));
    } catch (const CheckpointError& e) {
      note = "this fine-tune started from '" + from + "', which is not a valid checkpoint here (" + e.what() +
             "); give --compare to measure drift";
      spdlog::warn("[report] {}", note);
      return std::nullopt;
    }
  }
  // the same tokenizer, or the one a fine-tune with new pieces extended (its old ids mean the same pieces)
  const std::string base_tok = base ? util::sha256_file(base->tokenizer_model) : "";
  if (base && base_tok != s.tok->sha256() && tokenizer::read_extension(s.ck.tokenizer_model).extends_sha256 != base_tok) {
    throw CheckpointError("[report] --compare: expected a checkpoint with the same tokenizer as " + s.ck.dir.string() +
                          " (or the one its new pieces extend), got " + base->dir.string());
  }
  return base;
}

}  // namespace

ReportResult write_report(const ReportOptions& o) {
  if (o.points < 2 || o.neighbours < 1 || o.top_k < 1) {
    throw ConfigError("[report] expected --points >= 2, --neighbours >= 1 and --top-k >= 1");
  }
  const fs::path ckpt = checkpoint::resolve_checkpoint(o.target);
  Sources s{checkpoint::load_checkpoint(ckpt), {}, std::nullopt, {}, {}, std::nullopt};
  s.run_dir = run_dir_of(o.target, s.ck.dir);
  s.tok.emplace(s.ck.tokenizer_model);
  try {
    s.cfg = config::parse_config(s.ck.config_yaml, (s.ck.dir / "config.yaml").string(), {});
  } catch (const Error& e) {  // e.g. a checkpoint of another version: the report loses the data paths only
    spdlog::warn("[report] {}", e.what());
  }
  const fs::path out = o.output.empty() ? default_output(s) : o.output;
  check_output(out);
  if (o.neighbours >= s.ck.arch.vocab_size) {
    throw ConfigError("[report] --neighbours: expected 1.." + std::to_string(s.ck.arch.vocab_size - 1) + ", got " +
                      std::to_string(o.neighbours));
  }
  count_training_ids(s);
  std::string drift_note;
  const auto base = drift_base(s, o.compare, drift_note);

  nlohmann::json data;
  data["curves"] = curves_section(s.run_dir);
  data["summary"] = summary_section(s, data["curves"]);
  data["map"] = map_section(s, o.points, o.neighbours);
  data["positions"] = positions_section(s, data["map"]["ids"].get<std::vector<int32_t>>());
  data["drift"] = base ? drift_section(s, *base, 20) : nlohmann::json(nullptr);
  data["drift_note"] = drift_note;
  data["sentences"] = sentences_section(s);
  data["probs"] = o.prompt.empty() ? nlohmann::json(nullptr) : probs_section(s, o.prompt, o.top_k);
  data["context"] = o.context_texts.empty() ? nlohmann::json(nullptr)
                                            : context_section(s, o.context_texts, o.context_piece, o.top_k);
  nlohmann::json pieces = nlohmann::json::array();
  for (int32_t id = 0; id < s.tok->vocab_size(); ++id) pieces.push_back(s.tok->piece(id));
  data["pieces"] = pieces;

  const std::string page = render_page(data);
  util::atomic_write_file(out, page);
  return {out, page.size(), base ? base->dir.string() : ""};
}

}  // namespace lm::report
