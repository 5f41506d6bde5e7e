// Runs the bad-input and fault matrix (tests/matrix.h): every case is its own test, Matrix/FaultMatrix.Run/<name>,
// so CTest runs them in parallel. A case passes when lmtrain exits with the case's code, its output holds
// the expected message, and what must stay intact did. docs/FAULT_MATRIX.md is the same list as a table;
// LMTRAIN_WRITE_FAULT_MATRIX=1 rewrites it.
#include <fcntl.h>
#include <sys/file.h>

#include <gtest/gtest.h>

#include <csignal>
#include <regex>
#include <set>

#include "matrix.h"

namespace lm::test::matrix {

namespace {

RunSpec base_spec(const std::string& run) {
  RunSpec spec;
  spec.run = run;
  spec.extra = "checkpoint: {every: 2}\n";
  return spec;
}

std::vector<Case> all_cases() {
  std::vector<Case> out;
  for (auto group : {corpus_cases, config_cases, token_file_cases, checkpoint_cases, process_cases, signal_cases,
                      sampling_cases}) {
    for (auto& c : group()) out.push_back(std::move(c));
  }
  return out;
}

// Text for a markdown table cell (a `|` would end it).
std::string table_cell(std::string s) {
  for (size_t at = 0; (at = s.find('|', at)) != std::string::npos; at += 2) s.replace(at, 1, "\\|");
  return s;
}

// A regex as inline code: double backticks when it holds one.
std::string code_cell(const std::string& s) {
  return s.find('`') == std::string::npos ? "`" + table_cell(s) + "`" : "`` " + table_cell(s) + " ``";
}

std::string markdown_table(const std::vector<Case>& cases) {
  std::string t =
      "# The bad-input and fault matrix\n\n"
      "Generated from tests/matrix_*_test.cpp by tests/matrix_test.cpp (`LMTRAIN_WRITE_FAULT_MATRIX=1 "
      "build/lmtrain_tests --gtest_filter='Matrix.Document*'`); the test `Matrix.DocumentIsCurrent` fails when "
      "this file and the cases differ. Every row runs in `scripts/test.sh` as the CTest test "
      "`Matrix/FaultMatrix.Run/<case>`: the real binary (or `lmtrain_faults` for injected faults) on the input, then "
      "the exit code, the message (an ECMAScript regex from tests/matrix_expect.h) and what must stay intact "
      "are checked. Exit codes are listed in docs/errors.md \"Exit codes\".\n\n"
      "| # | case | input | exit | expected message (regex) | stays intact |\n|---|---|---|---|---|---|\n";
  int i = 0;
  for (const auto& c : cases) {
    t += "| " + std::to_string(++i) + " | `" + c.name + "` | " + table_cell(c.input) + " | " + std::to_string(c.exit_code) +
         " | " + code_cell(c.pattern) + " | " + table_cell(c.intact) + " |\n";
  }
  return t;
}

}  // namespace

Ctx::Ctx(const std::string& name) : dir_("m-" + name) {}

const fs::path& Ctx::base_run() {
  static const fs::path run = [] {
    // One base per lmtrain build (the full executable trains it), shared by every case process; the first
    // one trains it under a lock.
    const auto stamp = fs::last_write_time(LMTRAIN_FULL_BINARY).time_since_epoch().count();
    const fs::path base = fs::temp_directory_path() / ("lmtrain-matrix-base-" + std::to_string(stamp));
    const int fd = ::open((base.string() + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    ::flock(fd, LOCK_EX);
    if (!fs::exists(base / "ready")) {
      fs::remove_all(base);
      fs::create_directories(base);
      const ScratchDir unused("unused");  // an absolute run name puts the run and its YAML under `base`
      const fs::path cfg = write_run_config(unused, base_spec((base / "run").string()));
      auto r = run_lmtrain("train -c " + cfg.string());
      if (r.exit_code != 0) {
        ADD_FAILURE() << "the matrix's base run failed: " << r.output;
      } else {
        std::ofstream(base / "ready") << "ok\n";
      }
    }
    ::flock(fd, LOCK_UN);
    ::close(fd);
    return base / "run";
  }();
  return run;
}

std::string Ctx::base_final_sha() { return manifest_sha(base_run() / "step_00000004", "model.safetensors"); }

fs::path Ctx::write(const std::string& name, const std::string& bytes) const {
  const fs::path p = dir_ / name;
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << bytes;
  return p;
}

fs::path Ctx::copy_run(const std::string& name) const {
  const fs::path to = dir_ / name;
  fs::copy(base_run(), to, fs::copy_options::recursive);
  return to;
}

fs::path Ctx::copy_checkpoint(int step, const std::string& name) const {
  const fs::path to = dir_ / name;
  fs::copy(base_run() / ("step_0000000" + std::to_string(step)), to, fs::copy_options::recursive);
  return to;
}

fs::path Ctx::config(const std::string& run, const std::string& model) const {
  RunSpec spec = base_spec(run);
  if (!model.empty()) spec.model = model;
  return write_run_config(dir_, spec);
}

RunResult Ctx::lm(const std::string& args, const std::string& faults) const {
  return faults.empty() ? run_lmtrain(args) : run_lmtrain_faults(faults, args);
}

RunResult Ctx::signal_when(const std::string& args, const std::string& faults,
                           const std::function<bool(const std::string& log)>& ready, int sig) const {
  const fs::path log = dir_ / "signalled.log";
  const pid_t pid = spawn_lmtrain(args, log, faults);
  const bool seen = wait_for([&] { return ready(slurp(log)); });
  EXPECT_TRUE(seen) << "the moment to signal never came; log:\n" << slurp(log);
  ::kill(pid, sig);
  RunResult r;
  r.exit_code = wait_exit(pid);
  r.output = slurp(log);
  return r;
}

RunResult Ctx::signal_at(const std::string& args, const std::string& event, int sig, const std::string& then) const {
  const fs::path log = dir_ / "signalled.log";
  const pid_t pid = spawn_lmtrain(args, log, hold_at(dir_.path(), then.empty() ? event : event + "," + then));
  EXPECT_TRUE(held(dir_.path(), event)) << "never held at " << event << "; log:\n" << slurp(log);
  ::kill(pid, sig);
  if (!then.empty()) {
    EXPECT_TRUE(held(dir_.path(), then)) << "never held at " << then << "; log:\n" << slurp(log);
    ::kill(pid, SIGINT);
  }
  RunResult r;
  r.exit_code = wait_exit(pid);
  r.output = slurp(log);
  return r;
}

std::vector<std::string> Ctx::entries_with(const std::string& sub, const std::string& part) const {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir_ / sub, ec)) {
    const std::string n = e.path().filename().string();
    if (n.find(part) != std::string::npos) out.push_back(n);
  }
  return out;
}

std::string as_unprivileged() { return ::geteuid() == 0 ? "setpriv --bounding-set=-dac_override,-dac_read_search " : ""; }

void flip_bit(const fs::path& file, size_t offset, int bit) {
  std::string bytes = slurp(file);
  ASSERT_LT(offset, bytes.size()) << file;
  bytes[offset] = static_cast<char>(bytes[offset] ^ (1 << bit));
  std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
}

void truncate_to(const fs::path& file, size_t bytes) { fs::resize_file(file, bytes); }

// What gtest prints for a case (its name, not its bytes).
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class FaultMatrix : public ::testing::TestWithParam<Case> {};

TEST_P(FaultMatrix, Run) {
  const Case& c = GetParam();
  Ctx ctx(c.name);
  ASSERT_FALSE(Ctx::base_run().empty());
  const RunResult r = c.act(ctx);
  EXPECT_EQ(r.exit_code, c.exit_code) << c.input << "\n" << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex(c.pattern))) << "expected /" << c.pattern << "/ in:\n" << r.output;
  if (c.check) c.check(ctx, r);
}

INSTANTIATE_TEST_SUITE_P(Matrix, FaultMatrix, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

TEST(Matrix, HasAtLeastFiftyDistinctCases) {
  const auto cases = all_cases();
  std::set<std::string> names;
  for (const auto& c : cases) {
    EXPECT_TRUE(names.insert(c.name).second) << "duplicate case " << c.name;
    EXPECT_FALSE(c.intact.empty()) << c.name << " says nothing about what stays intact";
  }
  EXPECT_GE(cases.size(), 50u);
}

TEST(Matrix, DocumentIsCurrent) {
  const fs::path doc = fs::path(LMTRAIN_SOURCE_DIR) / "docs" / "FAULT_MATRIX.md";
  const std::string want = markdown_table(all_cases());
  if (const char* w = std::getenv("LMTRAIN_WRITE_FAULT_MATRIX"); w && std::string(w) == "1") {
    std::ofstream(doc) << want;
  }
  EXPECT_EQ(slurp(doc), want) << "docs/FAULT_MATRIX.md is stale: rerun with LMTRAIN_WRITE_FAULT_MATRIX=1";
}

}  // namespace lm::test::matrix
