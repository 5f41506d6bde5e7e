// Shared test helpers: scratch directories, the team-written corpora, a tokenizer trained once per process,
// and running the real lmtrain binary as a subprocess.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <fstream>
#include <sstream>
#include <functional>
#include <thread>
#include <vector>
#include <cstdio>
#include <filesystem>
#include <string>

#include <ATen/Parallel.h>

#include <algorithm>

#include "model/gpt_config.h"
#include "test_paths.h"
#include "tokenizer/tokenizer.h"
#include "util/threads.h"

namespace lm::test {

namespace fs = std::filesystem;

/// A fresh directory under the system temp dir, removed at destruction.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& tag) {
    path_ = fs::temp_directory_path() / ("lmtrain-test-" + tag + "-" + std::to_string(::getpid()));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

/// The tiny architecture of the unit tests: V as given, C=16, L=2, H=2, T=8.
inline model::GptConfig tiny_config(int64_t vocab = 64, bool tied = true,
                                    model::Positions pos = model::Positions::kLearned) {
  model::GptConfig c;
  c.vocab_size = vocab;
  c.d_model = 16;
  c.n_layers = 2;
  c.n_heads = 2;
  c.max_seq_len = 8;
  c.positions = pos;
  c.tie_embeddings = tied;
  return c;
}

inline fs::path data_file(const std::string& name) { return fs::path(LMTRAIN_TEST_DATA_DIR) / name; }

/// A 128-piece BPE tokenizer trained on tiny_en.txt once per test process.
inline const fs::path& english_tokenizer_path() {
  static ScratchDir dir("tok");
  static fs::path model = [] {
    fs::path p = dir / "en.model";
    tokenizer::TokenizerConfig cfg;
    cfg.vocab_size = 128;
    cfg.character_coverage = 1.0;
    tokenizer::train_tokenizer({data_file("tiny_en.txt")}, p, cfg, 1);
    return p;
  }();
  return model;
}

/// The tiny training run most tests use, as YAML. Each field is one section's flow-map body; an empty
/// string leaves that section out (a fine-tune takes tokenizer and model from its checkpoint).
struct RunSpec {
  std::string run = "run";  ///< run directory name inside the scratch dir; the YAML is <run>.yaml
  uint64_t seed = 3;
  std::string train_text = "tiny_en.txt", val_text = "tiny_en_val.txt";  ///< files in tests/data ("" val: held out)
  std::string tokenizer = "vocab_size: 128";
  std::string model = "d_model: 32, n_layers: 2, n_heads: 2, max_seq_len: 16";
  std::string train = "batch_size: 4, max_steps: 4, warmup_steps: 1, eval_every: 0";
  std::string extra;  ///< further YAML lines (checkpoint:, finetune:, ...)
};

/// Writes `spec` as dir/<run>.yaml and returns its path.
inline fs::path write_run_config(const ScratchDir& dir, const RunSpec& spec) {
  const fs::path cfg = dir / (spec.run + ".yaml");
  std::ofstream out(cfg);
  // fp32: the pinned losses are fp32's (run.precision auto may pick bf16 on a CPU where it is faster).
  out << "run: {dir: " << (dir / spec.run).string() << ", seed: " << spec.seed
      << ", threads: 1, blas_threads: 1, precision: fp32}\n"
      << "data: {train: " << data_file(spec.train_text).string()
      << (spec.val_text.empty() ? std::string() : ", val: " + data_file(spec.val_text).string()) << "}\n";
  if (!spec.tokenizer.empty()) out << "tokenizer: {" << spec.tokenizer << "}\n";
  if (!spec.model.empty()) out << "model: {" << spec.model << "}\n";
  out << "train: {" << spec.train << "}\n" << spec.extra;
  return cfg;
}

/// For a test's scope: two LibTorch threads and one OpenBLAS thread a call (the fused set's plan on 2 cores),
/// the counts before restored after.
struct FusedThreads {
  int threads = at::get_num_threads(), blas = util::blas_threads();
  FusedThreads() { util::set_compute_threads(2, 1); }
  ~FusedThreads() { util::set_compute_threads(threads, std::max(1, blas)); }
};

/// Result of running a command through /bin/sh.
struct RunResult {
  int exit_code = -1;
  std::string output;  ///< stdout and stderr together
};

/// Runs `cmd` with stderr merged into stdout and returns its exit code and output.
inline RunResult run_command(const std::string& cmd) {
  RunResult r;
  FILE* pipe = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!pipe) return r;
  std::array<char, 4096> buf{};
  while (size_t n = std::fread(buf.data(), 1, buf.size(), pipe)) r.output.append(buf.data(), n);
  int status = ::pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

/// Runs the real (release) lmtrain binary with `args`.
inline RunResult run_lmtrain(const std::string& args) { return run_command(std::string(LMTRAIN_BINARY) + " " + args); }

/// Runs the test build lmtrain_faults with `args` and fault variables, e.g. faults = "LMTRAIN_TEST_NAN_STEP=6"
/// (util/faults.h lists them).
inline RunResult run_lmtrain_faults(const std::string& faults, const std::string& args) {
  return run_command("env " + faults + " " + std::string(LMTRAIN_FAULTS_BINARY) + " " + args);
}

/// Starts `lmtrain args` in the background (via `sh -c "exec ..."`, so the pid is lmtrain's own), with
/// stdout and stderr going to `log`. Returns the pid. With `faults` (e.g. hold_at(dir, "step:3"))
/// the test build lmtrain_faults runs instead, with those variables set.
inline pid_t spawn_lmtrain(const std::string& args, const fs::path& log, const std::string& faults = "") {
  const std::string exe = faults.empty() ? std::string(LMTRAIN_BINARY) : "env " + faults + " " + LMTRAIN_FAULTS_BINARY;
  const std::string cmd = "exec " + exe + " " + args + " > '" + log.string() + "' 2>&1";
  pid_t pid = ::fork();
  if (pid == 0) {
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

/// Waits for a spawned process; returns its exit code, or 128 + signal number when killed.
inline int wait_exit(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/// Whole file as a string ("" when missing).
inline std::string slurp(const fs::path& p) {
  std::FILE* f = std::fopen(p.c_str(), "rb");
  if (!f) return "";
  std::string out;
  std::array<char, 4096> buf{};
  while (size_t n = std::fread(buf.data(), 1, buf.size(), f)) out.append(buf.data(), n);
  std::fclose(f);
  return out;
}

/// The lines of `text`, without their newlines.
inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// Training losses from metrics.jsonl, one line per step, as printed with %.9g.
inline std::vector<std::string> losses(const fs::path& run) {
  std::vector<std::string> out;
  std::ifstream in(run / "metrics.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    if (line.find("\"kind\":\"train\"") == std::string::npos) continue;
    auto at = line.find("\"loss\":") + 7;
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.9g", std::stod(line.substr(at)));
    out.push_back(buf);
  }
  return out;
}

inline std::string manifest_sha(const fs::path& ckpt, const std::string& file) {
  std::string m = slurp(ckpt / "manifest.json");
  auto at = m.find("\"name\": \"" + file + "\"");
  auto sha = m.find("\"sha256\": \"", at) + 11;
  return at == std::string::npos ? "" : m.substr(sha, 64);
}

/// True when some line of `text` starts with the words `words`, however they are spaced (tables pad
/// columns; a test checks the values, not the padding).
inline bool has_row(const std::string& text, const std::vector<std::string>& words) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::istringstream ls(line);
    size_t i = 0;
    for (std::string w; i < words.size() && ls >> w && w == words[i];) ++i;
    if (i == words.size()) return true;
  }
  return false;
}

/// A "key value" line of a table such as `ckpt info` ("step         8").
inline bool has_field(const std::string& text, const std::string& key, const std::string& value) {
  return has_row(text, {key, value});
}

inline bool wait_for(const std::function<bool()>& cond, int timeout_ms = 60000) {
  for (int waited = 0; waited < timeout_ms; waited += 10) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

/// lmtrain_faults variables that hold the run at each of `events` ("step:3,save:step_00000002:file"; the
/// events are listed in util/faults.h), the first time it gets there, until it receives a stop signal or
/// let_go(): no delay decides when a test's signal lands.
inline std::string hold_at(const fs::path& dir, const std::string& events) {
  return "LMTRAIN_TEST_HOLD_DIR=" + dir.string() + " LMTRAIN_TEST_HOLD=" + events;
}

/// Waits until a process spawned with hold_at(dir, ...) is held at `event` (in a multi-process run,
/// "EVENT@RANK"): the file it writes there exists.
inline bool held(const fs::path& dir, const std::string& event) {
  return wait_for([&] { return fs::exists(dir / event); });
}

/// Lets a process held at `event` go on without a signal.
inline void let_go(const fs::path& dir, const std::string& event) { std::ofstream(dir / (event + ".go")) << "go\n"; }
inline std::string hold_at(const ScratchDir& dir, const std::string& events) { return hold_at(dir.path(), events); }
inline bool held(const ScratchDir& dir, const std::string& event) { return held(dir.path(), event); }
inline void let_go(const ScratchDir& dir, const std::string& event) { let_go(dir.path(), event); }

}  // namespace lm::test
