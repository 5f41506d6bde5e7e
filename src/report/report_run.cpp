// The run's own record: the curves of metrics.jsonl and the summary (config, parameters, data, time).
#include <cmath>
#include <cstdio>
#include <fstream>

#include "inspect/params.h"
#include "report/sections.h"
#include "train/metrics.h"
#include "util/fs.h"

namespace lm::report {
namespace fs = std::filesystem;

nlohmann::json rounded(double x, int digits) {
  if (!std::isfinite(x)) return nullptr;
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.*g", digits, x);
  return std::strtod(buf, nullptr);
}

namespace {

double num(const nlohmann::json& r, const char* key) {
  const auto it = r.find(key);
  return it != r.end() && it->is_number() ? it->get<double>() : NAN;
}

nlohmann::json columns(std::initializer_list<const char*> names) {
  nlohmann::json out = nlohmann::json::object();
  for (const char* n : names) out[n] = nlohmann::json::array();
  return out;
}

// Adds up each process's span: from its start/resume record to its last record.
nlohmann::json wall_seconds(const std::vector<nlohmann::json>& records) {
  double total = 0, first = NAN, last = NAN;
  bool timed = false;
  for (const auto& r : records) {
    const double t = num(r, "time");
    if (!std::isfinite(t)) continue;
    const std::string kind = r.value("kind", "");
    if (kind == "start" || kind == "resume") {
      if (std::isfinite(first)) total += last - first;
      first = last = t;
      timed = true;
    } else if (std::isfinite(first)) {
      last = t;
    }
  }
  if (std::isfinite(first)) total += last - first;
  return timed ? rounded(total, 6) : nlohmann::json(nullptr);
}

}  // namespace

nlohmann::json curves_section(const fs::path& run_dir) {
  nlohmann::json train = columns({"step", "loss", "lr", "tokens_per_s"}), val = columns({"step", "loss", "bpb"}),
                 full = columns({"step", "loss", "bpb"}), segments = nlohmann::json::array();
  nlohmann::json unit = train::kNatsPerToken;  // the last start/resume record's; older files: next-token
  std::vector<nlohmann::json> records;
  std::ifstream in(run_dir / "metrics.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    try {
      auto r = nlohmann::json::parse(line);
      // a record of another shape (hand-edited) is skipped like a torn one
      if (r.is_object() && r["kind"].is_string() && r["step"].is_number_integer()) records.push_back(std::move(r));
    } catch (const nlohmann::json::exception&) {
      // a torn line from a killed run: skip it, as `plot` does
    }
  }
  for (const auto& r : records) {
    const std::string kind = r.value("kind", "");
    if (kind == "train") {
      train["step"].push_back(r.value("step", 0));
      train["loss"].push_back(rounded(num(r, "loss")));
      train["lr"].push_back(rounded(num(r, "lr"), 4));
      train["tokens_per_s"].push_back(rounded(num(r, "tokens_per_s"), 4));
    } else if (kind == "val") {
      const auto whole = r.find("full");
      auto& dst = whole != r.end() && *whole == true ? full : val;
      dst["step"].push_back(r.value("step", 0));
      dst["loss"].push_back(rounded(num(r, "loss")));
      dst["bpb"].push_back(rounded(num(r, "bpb")));
    } else if (kind == "start" || kind == "resume") {
      segments.push_back({{"kind", kind}, {"step", r.value("step", 0)}});
      if (r.contains("loss_unit") && r["loss_unit"].is_string()) unit = r["loss_unit"];
    }
  }
  return {{"file", (run_dir / "metrics.jsonl").string()}, {"found", fs::is_regular_file(run_dir / "metrics.jsonl")},
          {"train", train}, {"val", val}, {"full", full}, {"segments", segments}, {"wall_s", wall_seconds(records)},
          {"loss_unit", unit}};
}

namespace {

nlohmann::json params_json(const model::GptConfig& arch) {
  const auto pc = inspect::count_params(arch);
  nlohmann::json lines = nlohmann::json::array();
  for (const auto& l : pc.lines) lines.push_back({{"name", l.name}, {"shapes", l.shapes}, {"count", l.count}});
  return {{"lines", lines},
          {"total", pc.total},
          {"embedding", pc.embedding},
          {"positions", pc.positions},
          {"per_block", pc.per_block},
          {"untied_head", pc.untied_head},
          {"tying_saving", pc.tying_saving},
          {"embedding_share", rounded(static_cast<double>(pc.embedding) / static_cast<double>(pc.total), 4)},
          {"arithmetic", inspect::format_table_arithmetic(arch.vocab_size, arch.d_model)}};
}

// A data file named in the config: its path and size in bytes (null when it is not there any more).
nlohmann::json data_file(const std::string& path) {
  std::error_code ec;
  const auto size = path.empty() ? 0 : fs::file_size(path, ec);
  return {{"path", path}, {"bytes", path.empty() || ec ? nlohmann::json(nullptr) : nlohmann::json(size)}};
}

// The final validation: the last whole-file one in metrics.jsonl at the checkpoint's step, else the state's.
// A contrastive fine-tune's validation loss is InfoNCE (train/contrastive.h): no perplexity, no bits per byte.
nlohmann::json final_validation(const Sources& s, const nlohmann::json& curves) {
  const bool contrastive = s.cfg && s.cfg->finetune.objective == train::Objective::kContrastive;
  // an encoder's metrics name its loss (InfoNCE, with or without the next-token term); older ones did not
  const std::string logged = curves.value("loss_unit", std::string(train::kNatsPerToken));
  const std::string unit = !contrastive ? train::kNatsPerToken
                                        : (logged == train::kNatsPerToken ? "InfoNCE" : logged) + " of the held-out pairs";
  auto result = [&](const char* kind, const nlohmann::json& loss, const nlohmann::json& bpb) -> nlohmann::json {
    const bool nats = !contrastive && loss.is_number();
    return {{"kind", kind}, {"loss", loss}, {"ppl", nats ? rounded(std::exp(loss.get<double>())) : nlohmann::json(nullptr)},
            {"bpb", contrastive ? nlohmann::json(nullptr) : bpb},
            {"unit", unit}};
  };
  const auto& full = curves["full"];
  for (size_t i = full["step"].size(); i-- > 0;) {
    if (full["step"][i].get<int64_t>() != s.ck.state.step || full["loss"][i].is_null()) continue;
    return result(contrastive ? "final (all held-out pairs)" : "final (whole val file)", full["loss"][i], full["bpb"][i]);
  }
  return result("last periodic", rounded(s.ck.state.last_val_loss), rounded(s.ck.state.last_val_bpb));
}

}  // namespace

nlohmann::json summary_section(const Sources& s, const nlohmann::json& curves) {
  const auto& st = s.ck.state;
  // A run whose config names no validation file trained on run.dir/train.txt and validated on val.txt, both
  // cut from one data.train file, or held out whole files of several (data/split.h).
  const bool held_out = s.cfg && s.cfg->data.val.empty();
  const bool lines = held_out && fs::is_regular_file(s.run_dir / "val.txt");
  const std::string val = lines ? (s.run_dir / "val.txt").string()
                          : held_out ? s.cfg->data.train + " (whole files held out)"
                          : s.cfg ? s.cfg->data.val : "";
  nlohmann::json data_json = {{"train", data_file(lines ? (s.run_dir / "train.txt").string() : s.cfg ? s.cfg->data.train : "")},
                              {"val", data_file(val)},
                              {"held_out_of", held_out ? nlohmann::json(s.cfg->data.train) : nlohmann::json(nullptr)},
                              {"val_fraction", held_out ? nlohmann::json(s.cfg->data.val_fraction) : nlohmann::json(nullptr)},
                              {"train_tokens", st.data.train_tokens},
                              {"val_tokens", st.data.val_tokens},
                              {"tokenizer_sha256", st.data.tokenizer_sha256}};
  const auto& a = s.ck.arch;
  return {{"checkpoint", s.ck.dir.string()},
          {"run_dir", s.run_dir.string()},
          {"step", st.step},
          {"tokens_seen", st.tokens_seen},
          {"world_size", st.world_size},
          {"wall_s", curves["wall_s"]},
          {"final_val", final_validation(s, curves)},
          {"arch",
           {{"vocab_size", a.vocab_size}, {"d_model", a.d_model}, {"n_layers", a.n_layers}, {"n_heads", a.n_heads},
            {"max_seq_len", a.max_seq_len}, {"mlp_ratio", a.mlp_ratio}, {"positions", model::to_string(a.positions)},
            {"tie_embeddings", a.tie_embeddings}}},
          {"params", params_json(a)},
          {"data", data_json},
          {"config_yaml", s.ck.config_yaml}};
}

}  // namespace lm::report
