#include "checkpoint/checkpoint.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

#include "util/errors.h"
#include "util/fs.h"
#include "util/hash.h"

namespace lm::checkpoint {
namespace {

using json = nlohmann::json;

json state_to_json(const TrainerState& s) {
  auto num = [](double v) { return std::isfinite(v) ? json(v) : json(nullptr); };
  return json{{"step", s.step},
              {"tokens_seen", s.tokens_seen},
              {"data_cursor", s.data_cursor},
              {"last_val_loss", num(s.last_val_loss)},
              {"best_val_loss", num(s.best_val_loss)}};
}

TrainerState state_from_json(const json& j) {
  auto num = [&](const char* k) { return j.at(k).is_null() ? NAN : j.at(k).get<double>(); };
  TrainerState s;
  s.step = j.at("step").get<int64_t>();
  s.tokens_seen = j.at("tokens_seen").get<int64_t>();
  s.data_cursor = j.at("data_cursor").get<uint64_t>();
  s.last_val_loss = num("last_val_loss");
  s.best_val_loss = num("best_val_loss");
  return s;
}

std::string weights_bytes(const model::GptImpl& m) {
  c10::Dict<std::string, torch::Tensor> dict;
  for (auto& [name, t] : model::named_weights(m)) dict.insert(name, t.detach().cpu().contiguous());
  std::vector<char> bytes = torch::pickle_save(dict);
  return std::string(bytes.begin(), bytes.end());
}

std::string optimizer_bytes(const torch::optim::Optimizer& opt) {
  std::ostringstream ss;
  torch::serialize::OutputArchive archive;
  opt.save(archive);
  archive.save_to(ss);
  return ss.str();
}

json read_json(const fs::path& p) {
  try {
    return json::parse(util::read_file(p, "checkpoint file"));
  } catch (const json::exception& e) {
    throw CheckpointError("[checkpoint] '" + p.string() + "' is not valid JSON: " + e.what());
  } catch (const DataError& e) {
    throw CheckpointError(e.what());
  }
}

}  // namespace

std::string step_name(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step_%08lld", static_cast<long long>(step));
  return buf;
}

fs::path save_checkpoint(const fs::path& run_dir, const std::string& name, const SaveRequest& req) {
  fs::path final_dir = run_dir / name;
  fs::path tmp = run_dir / (name + "." + util::temp_suffix());
  try {
    fs::create_directories(tmp);
    std::vector<std::pair<std::string, std::string>> files;
    files.emplace_back("model.pt", weights_bytes(*req.model));
    if (req.optimizer) files.emplace_back("optimizer.pt", optimizer_bytes(*req.optimizer));
    files.emplace_back("trainer_state.json", state_to_json(req.state).dump(2) + "\n");
    files.emplace_back("config.yaml", req.config_yaml);
    files.emplace_back("arch.json", json(req.model->config()).dump(2) + "\n");
    files.emplace_back("tokenizer.model", util::read_file(req.tokenizer_model, "tokenizer model"));
    json manifest{{"format_version", kFormatVersion}, {"files", json::array()}};
    for (auto& [fname, bytes] : files) {
      util::write_file_synced(tmp / fname, bytes);
      manifest["files"].push_back({{"name", fname}, {"bytes", bytes.size()}, {"sha256", util::sha256_hex(bytes)}});
    }
    util::write_file_synced(tmp / "manifest.json", manifest.dump(2) + "\n");
    util::fsync_dir(tmp);
    if (fs::exists(final_dir)) fs::remove_all(final_dir);  // a stale same-step dir from an older run
    fs::rename(tmp, final_dir);
    util::fsync_dir(run_dir);
    util::atomic_write_file(run_dir / "latest", name + "\n");
  } catch (const std::exception& e) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    if (dynamic_cast<const SaveError*>(&e)) throw;
    throw SaveError("[checkpoint] saving '" + final_dir.string() + "' failed: " + e.what());
  }
  return final_dir;
}

void verify_checkpoint(const fs::path& dir) {
  fs::path mpath = dir / "manifest.json";
  if (!fs::is_regular_file(mpath)) {
    throw CheckpointError("[checkpoint] '" + dir.string() +
                          "' is not a checkpoint: expected manifest.json. Hint: an interrupted save leaves no manifest.");
  }
  json m = read_json(mpath);
  if (m.value("format_version", -1) != kFormatVersion) {
    throw CheckpointError("[checkpoint] format version: expected " + std::to_string(kFormatVersion) + ", got " +
                          m.value("format_version", json(-1)).dump());
  }
  for (const auto& f : m.at("files")) {
    fs::path p = dir / f.at("name").get<std::string>();
    if (!fs::is_regular_file(p)) throw CheckpointError("[checkpoint] file missing: expected " + p.string());
    auto size = fs::file_size(p);
    if (size != f.at("bytes").get<uint64_t>()) {
      throw CheckpointError("[checkpoint] size of " + p.string() + ": expected " + f.at("bytes").dump() +
                            ", got " + std::to_string(size));
    }
    if (util::sha256_file(p) != f.at("sha256").get<std::string>()) {
      throw CheckpointError("[checkpoint] SHA-256 of " + p.string() + " does not match the manifest");
    }
  }
}

fs::path resolve_checkpoint(const fs::path& path) {
  if (fs::is_regular_file(path / "manifest.json")) return path;
  if (fs::is_regular_file(path / "latest")) {
    std::string name = util::read_file(path / "latest", "latest pointer");
    while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
    return path / name;
  }
  throw CheckpointError("[checkpoint] no checkpoint at '" + path.string() +
                        "': expected a checkpoint directory (with manifest.json) or a run directory with `latest`");
}

void load_weights(model::GptImpl& model, const fs::path& model_pt) {
  std::string bytes = util::read_file(model_pt, "weights");
  torch::IValue iv;
  try {
    iv = torch::pickle_load(std::vector<char>(bytes.begin(), bytes.end()));
  } catch (const c10::Error& e) {
    throw CheckpointError("[checkpoint] cannot read weights '" + model_pt.string() + "': " + e.what_without_backtrace());
  }
  if (!iv.isGenericDict()) throw CheckpointError("[checkpoint] weights: expected a name -> tensor dict");
  std::map<std::string, torch::Tensor> stored;
  for (const auto& kv : iv.toGenericDict()) stored[kv.key().toStringRef()] = kv.value().toTensor();
  auto expected = model::named_weights(model);
  // Check everything before copying anything: torch::load alone would silently take the file's shapes.
  for (auto& [name, t] : expected) {
    auto it = stored.find(name);
    if (it == stored.end()) throw CheckpointError("[checkpoint] weight missing: expected '" + name + "' in " + model_pt.string());
    if (it->second.sizes() != t.sizes()) {
      std::ostringstream ss;
      ss << "[checkpoint] shape of '" << name << "': expected " << t.sizes() << ", got " << it->second.sizes();
      throw CheckpointError(ss.str());
    }
  }
  if (stored.size() != expected.size()) {
    for (auto& [name, t] : stored) {
      bool known = std::any_of(expected.begin(), expected.end(), [&](auto& e) { return e.first == name; });
      if (!known) {
        throw CheckpointError("[checkpoint] unexpected weight '" + name + "' (does tie_embeddings match the checkpoint?)");
      }
    }
  }
  torch::NoGradGuard no_grad;
  for (auto& [name, t] : expected) t.copy_(stored[name]);
}

LoadedCheckpoint load_checkpoint(const fs::path& dir_arg) {
  LoadedCheckpoint out;
  out.dir = resolve_checkpoint(dir_arg);
  verify_checkpoint(out.dir);
  try {
    out.arch = read_json(out.dir / "arch.json").get<model::GptConfig>();
    out.state = state_from_json(read_json(out.dir / "trainer_state.json"));
  } catch (const json::exception& e) {
    throw CheckpointError("[checkpoint] '" + out.dir.string() + "' has a malformed arch/state: " + e.what());
  }
  out.config_yaml = util::read_file(out.dir / "config.yaml", "checkpoint config");
  out.tokenizer_model = out.dir / "tokenizer.model";
  out.model = model::Gpt(out.arch);
  load_weights(*out.model, out.dir / "model.pt");
  return out;
}

void load_optimizer(torch::optim::Optimizer& opt, const fs::path& dir) {
  fs::path p = dir / "optimizer.pt";
  if (!fs::is_regular_file(p)) throw CheckpointError("[checkpoint] optimizer state missing: expected " + p.string());
  try {
    torch::serialize::InputArchive archive;
    archive.load_from(p.string());
    opt.load(archive);
  } catch (const c10::Error& e) {
    throw CheckpointError("[checkpoint] cannot read optimizer state '" + p.string() + "': " + e.what_without_backtrace());
  }
}

std::vector<fs::path> list_checkpoints(const fs::path& run_dir) {
  std::vector<fs::path> steps;
  if (!fs::is_directory(run_dir)) return steps;
  for (const auto& e : fs::directory_iterator(run_dir)) {
    const std::string n = e.path().filename().string();
    if (e.is_directory() && n.rfind("step_", 0) == 0 && n.find(".tmp-") == std::string::npos &&
        fs::is_regular_file(e.path() / "manifest.json")) {
      steps.push_back(e.path());
    }
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

void prune_checkpoints(const fs::path& run_dir, int64_t keep_last) {
  auto steps = list_checkpoints(run_dir);
  for (size_t i = 0; i + static_cast<size_t>(keep_last) < steps.size(); ++i) fs::remove_all(steps[i]);
}

}  // namespace lm::checkpoint
