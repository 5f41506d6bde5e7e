#include "checkpoint/checkpoint.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <chrono>
#include <csignal>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "checkpoint/tensor_files.h"
#include "util/errors.h"
#include "util/faults.h"
#include "util/fs.h"
#include "util/hash.h"

namespace lm::checkpoint {
namespace {

using json = nlohmann::json;

// A member added to TrainerState or DataIdentity changes its size: list it in visit_state_fields or
// visit_identity_fields (checkpoint.h), then update these.
static_assert(sizeof(DataIdentity) == 4 * sizeof(std::string) + 2 * sizeof(uint64_t),
              "DataIdentity changed: list the new field in visit_identity_fields");
static_assert(sizeof(TrainerState) == 12 * sizeof(int64_t) + 3 * sizeof(std::string) + sizeof(DataIdentity),
              "TrainerState changed: list the new field in visit_state_fields");

// The two records' field lists, by record type, so one pair of functions reads and writes both.
template <class Visit>
void visit_fields(const DataIdentity& d, Visit&& v) { visit_identity_fields(d, v); }
template <class Visit>
void visit_fields(DataIdentity& d, Visit&& v) { visit_identity_fields(d, v); }
template <class Visit>
void visit_fields(const TrainerState& s, Visit&& v) { visit_state_fields(s, v); }
template <class Visit>
void visit_fields(TrainerState& s, Visit&& v) { visit_state_fields(s, v); }

json field_json(int64_t v) { return v; }
json field_json(uint64_t v) { return v; }
json field_json(bool v) { return v; }
json field_json(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }
json field_json(const std::string& v) { return v; }
template <class Record>
json field_json(const Record& r) {  // DataIdentity, TrainerState: an object, one key a listed field
  json j = json::object();
  visit_fields(r, [&](const char* key, const auto& v, Presence) { j[key] = field_json(v); });
  return j;
}

void field_from(const json& j, int64_t& v) { v = j.get<int64_t>(); }
void field_from(const json& j, uint64_t& v) { v = j.get<uint64_t>(); }
void field_from(const json& j, bool& v) { v = j.get<bool>(); }
void field_from(const json& j, double& v) { v = j.is_null() ? NAN : j.get<double>(); }
void field_from(const json& j, std::string& v) { v = j.get<std::string>(); }
template <class Record>
void field_from(const json& j, Record& r) {  // a field marked kMayLack keeps its default when missing
  visit_fields(r, [&](const char* key, auto& v, Presence p) {
    if (p == Presence::kRequired || j.contains(key)) field_from(j.at(key), v);
  });
}

TrainerState state_from(const json& j) {
  TrainerState s;
  field_from(j, s);
  return s;
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

// A single path component: what a manifest entry or `latest` may name.
bool plain_name(const std::string& n) {
  return !n.empty() && n != "." && n != ".." && n.find('/') == std::string::npos && n.find('\0') == std::string::npos;
}

}  // namespace

std::string trainer_state_json(const TrainerState& s) { return field_json(s).dump(2) + "\n"; }

TrainerState trainer_state_from_json(const std::string& text) { return state_from(json::parse(text)); }

// ". Hint: pass RUN/step_N, the newest" when the run directory holds checkpoints.
static std::string newest_hint(const fs::path& run_dir) {
  auto all = list_checkpoints(run_dir);
  return all.empty() ? "" : ". Hint: pass " + all.back().string() + ", the newest checkpoint there";
}

std::string step_name(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step_%08lld", static_cast<long long>(step));
  return buf;
}

static void verify_files(const fs::path& dir, const json& m);

fs::path save_checkpoint(const fs::path& run_dir, const std::string& name, const SaveRequest& req) {
  fs::path final_dir = run_dir / name;
  fs::path tmp = run_dir / (name + "." + util::temp_suffix());
  // Test builds may hold or kill the process at each phase (util/faults.h).
  auto reached = [&](const char* phase) { util::fault_hooks().reached("save:" + name + ":" + phase); };
  try {
    fs::create_directories(tmp);
    std::vector<std::pair<std::string, std::string>> files;
    files.emplace_back("model.safetensors", weights_bytes(*req.model));
    if (req.optimizer) files.emplace_back("optimizer.pt", optimizer_bytes(*req.optimizer, *req.model, req.muon_state));
    files.emplace_back("trainer_state.json", trainer_state_json(req.state));
    files.emplace_back("config.yaml", req.config_yaml);
    files.emplace_back("arch.json", json(req.model->config()).dump(2) + "\n");
    files.emplace_back("tokenizer.model", util::read_file(req.tokenizer_model, "tokenizer model"));
    // a fine-tune's extended tokenizer: which pieces it added, and from which old ones (tokenizer/extend.h)
    if (!req.tokenizer_extension.empty()) {
      files.emplace_back("tokenizer.model.json", util::read_file(req.tokenizer_extension, "tokenizer sidecar"));
    }
    json manifest{{"format_version", kFormatVersion}, {"files", json::array()}};
    for (auto& [fname, bytes] : files) {
      if (fname != files.front().first && util::fault_hooks().fail_save(name)) {
        throw SaveError("[checkpoint] writing " + (tmp / fname).string() +
                        " failed: No space left on device (injected fault, test build)");
      }
      util::write_file_synced(tmp / fname, bytes);
      manifest["files"].push_back({{"name", fname}, {"bytes", bytes.size()}, {"sha256", util::sha256_hex(bytes)}});
      reached("file");
    }
    util::write_file_synced(tmp / "manifest.json", manifest.dump(2) + "\n");
    util::fsync_dir(tmp);
    reached("manifest");
    // Replacing (e.g. `best`): move the old one aside first, so a crash leaves one of the two intact.
    fs::path old = run_dir / (name + ".old-" + util::temp_suffix());
    const bool had_old = fs::exists(final_dir);
    if (had_old) fs::rename(final_dir, old);
    std::error_code rename_ec;
    fs::rename(tmp, final_dir, rename_ec);
    if (rename_ec) {
      if (had_old) fs::rename(old, final_dir, rename_ec);  // put the previous one back
      throw SaveError("[checkpoint] cannot rename '" + tmp.string() + "' into place");
    }
    util::fsync_dir(run_dir);
    reached("renamed");
    if (had_old) {
      std::error_code ec;
      fs::remove_all(old, ec);  // committed already; a leftover is cleaned by the next resume
    }
    if (req.update_latest) util::atomic_write_file(run_dir / "latest", name + "\n");
    reached("latest");
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
  try {
    verify_files(dir, m);
  } catch (const json::exception& e) {
    throw CheckpointError("[checkpoint] manifest of '" + dir.string() + "' is malformed: " + e.what());
  }
}

static void verify_files(const fs::path& dir, const json& m) {
  if (m.value("format_version", -1) != kFormatVersion) {
    throw CheckpointError("[checkpoint] format version: expected " + std::to_string(kFormatVersion) + ", got " +
                          m.value("format_version", json(-1)).dump());
  }
  std::set<std::string> listed;
  for (const auto& f : m.at("files")) {
    const std::string name = f.at("name").get<std::string>();
    if (!plain_name(name)) {
      throw CheckpointError("[checkpoint] manifest of '" + dir.string() + "' names '" + name +
                            "': expected a file name inside the checkpoint (no '/', '..' or absolute path)");
    }
    listed.insert(name);
    fs::path p = dir / name;
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
  // Every file that loading reads must be covered by a hash.
  for (const char* need : {"arch.json", "trainer_state.json", "config.yaml", "tokenizer.model"}) {
    if (!listed.count(need)) {
      throw CheckpointError("[checkpoint] manifest of '" + dir.string() + "' does not list " + need +
                            ": expected every file of the checkpoint with its size and SHA-256");
    }
  }
  if (!listed.count("model.safetensors") && !listed.count("model.pt")) {
    throw CheckpointError("[checkpoint] manifest of '" + dir.string() +
                          "' lists no weights: expected model.safetensors (or model.pt of older checkpoints)");
  }
}

namespace {

// "runs/x/step_1/" and "." name the same directories as "runs/x/step_1" and the working directory; written
// without the trailing separator and the dots, a checkpoint's parent_path() is its run. Nothing else changes,
// so the result compares equal to list_checkpoints' entries.
fs::path tidy(fs::path t) {
  while (t.filename().empty() && t.has_parent_path() && t != t.root_path()) t = t.parent_path();
  if (t.filename() == "." || t.filename() == "..") t = fs::absolute(t).lexically_normal();
  while (t.filename().empty() && t.has_parent_path() && t != t.root_path()) t = t.parent_path();
  return t;
}

}  // namespace

fs::path resolve_checkpoint(const fs::path& user_path) {
  const fs::path path = user_path.empty() ? user_path : tidy(user_path);
  if (const auto p = util::read_problem(path); p && p->denied) {  // shut off, not missing
    throw CheckpointError("[checkpoint] '" + path.string() + "' " + p->what + ". " + p->hint);
  }
  if (fs::is_regular_file(path / "manifest.json")) return path;
  if (fs::is_regular_file(path / "latest")) {
    std::string name = util::read_file(path / "latest", "latest pointer");
    while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
    if (!plain_name(name)) {
      throw CheckpointError("[checkpoint] " + (path / "latest").string() + " names '" + name +
                            "': expected the name of a checkpoint inside the run directory");
    }
    if (!fs::is_regular_file(path / name / "manifest.json")) {
      // a stale pointer (the checkpoint was deleted, or never finished): readers take the newest valid
      // checkpoint, as `--resume auto` does, and say which pointer was stale
      const std::string why = fs::is_directory(path / name) ? "which has no manifest.json" : "which does not exist";
      const auto all = list_checkpoints(path);
      if (all.empty()) {
        throw CheckpointError("[checkpoint] " + (path / "latest").string() + " names '" + name + "', " + why +
                              ": expected a checkpoint directory, and " + path.string() + " holds no other checkpoint");
      }
      spdlog::warn("[checkpoint] {} names '{}', {}: using {}, the newest checkpoint there", (path / "latest").string(), name,
                   why, all.back().string());
      return all.back();
    }
    return path / name;
  }
  if (!fs::is_directory(path)) {
    throw CheckpointError("[checkpoint] no checkpoint at '" + path.string() + "': expected a checkpoint directory " +
                          "(with manifest.json) or a run directory with `latest`, got " +
                          (fs::exists(path) ? "a file" : "nothing"));
  }
  throw CheckpointError("[checkpoint] no checkpoint at '" + path.string() +
                        "': expected a checkpoint directory (with manifest.json) or a run directory with `latest`" +
                        newest_hint(path));
}

TrainerState read_trainer_state(const fs::path& dir) {
  try {
    return state_from(read_json(dir / "trainer_state.json"));
  } catch (const json::exception& e) {
    throw CheckpointError("[checkpoint] '" + dir.string() + "' has a malformed trainer_state.json: " + e.what());
  }
}

model::GptConfig read_arch(const fs::path& dir) {
  try {
    return read_json(dir / "arch.json").get<model::GptConfig>();
  } catch (const json::exception& e) {
    throw CheckpointError("[checkpoint] '" + dir.string() + "' has a malformed arch.json: " + e.what());
  }
}

std::vector<std::string> remove_stale_temps(const fs::path& run_dir) {
  std::vector<std::string> removed;
  if (!fs::is_directory(run_dir)) return removed;
  for (const auto& e : fs::directory_iterator(run_dir)) {
    const std::string n = e.path().filename().string();
    std::error_code ec;
    if (auto at = n.find(".old-"); at != std::string::npos) {
      // A crash between "move the old one aside" and "move the new one in": the old one is still good.
      fs::path original = run_dir / n.substr(0, at);
      if (!fs::exists(original)) {
        fs::rename(e.path(), original, ec);
        if (!ec) continue;
      }
      fs::remove_all(e.path(), ec);
      removed.push_back(n);
    } else if (n.find(".tmp-") != std::string::npos) {
      fs::remove_all(e.path(), ec);
      removed.push_back(n);
    }
  }
  return removed;
}

LoadedCheckpoint load_checkpoint(const fs::path& dir_arg, model::OpsPtr ops) {
  LoadedCheckpoint out;
  out.dir = resolve_checkpoint(dir_arg);
  verify_checkpoint(out.dir);
  out.arch = read_arch(out.dir);
  out.state = read_trainer_state(out.dir);
  out.config_yaml = util::read_file(out.dir / "config.yaml", "checkpoint config");
  out.tokenizer_model = out.dir / "tokenizer.model";
  out.model = model::Gpt(out.arch, std::move(ops));
  load_weights(*out.model, out.dir);
  return out;
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
  for (size_t i = 0; i + static_cast<size_t>(keep_last) < steps.size(); ++i) {
    std::error_code ec;  // a checkpoint that cannot be pruned is left in place, never an error
    fs::remove_all(steps[i], ec);
  }
}

}  // namespace lm::checkpoint
