#include "train/metrics.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <utility>
#include <vector>

#include "util/errors.h"
#include "util/fs.h"
#include "util/logging.h"

namespace lm::train {
namespace fs = std::filesystem;

namespace {
void write_record(std::FILE* f, nlohmann::json j) {
  if (!f) return;  // a rank other than 0
  const auto now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  j["time"] = std::round(now * 1000.0) / 1000.0;
  const std::string s = j.dump() + "\n";
  std::fwrite(s.data(), 1, s.size(), f);
  std::fflush(f);
}
}  // namespace

MetricsLog::MetricsLog(const fs::path& path, int64_t resume_step, std::string loss_unit) : unit_(std::move(loss_unit)) {
  if (path.empty()) return;
  std::string kept;
  if (resume_step > 0 && fs::is_regular_file(path)) {
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
      try {
        if (nlohmann::json::parse(line).at("step").get<int64_t>() <= resume_step) kept += line + "\n";
      } catch (const nlohmann::json::exception&) {
        // a torn last line from a killed process: drop it
      }
    }
  }
  util::atomic_write_file(path, kept);
  f_ = std::fopen(path.c_str(), "a");
  if (!f_) throw SaveError("[metrics] cannot open '" + path.string() + "' for appending");
  write_record(f_, {{"kind", resume_step > 0 ? "resume" : "start"}, {"step", resume_step}, {"loss_unit", unit_}});
}

MetricsLog::~MetricsLog() {
  if (f_) std::fclose(f_);
}


void MetricsLog::train(int64_t step, double loss, double lr, double grad_norm, double tokens_per_s,
                       int64_t tokens_seen) {
  write_record(f_, {{"kind", "train"}, {"step", step}, {"loss", loss}, {"lr", lr}, {"grad_norm", grad_norm},
                    {"tokens_per_s", tokens_per_s}, {"tokens_seen", tokens_seen}});
}

void MetricsLog::val(int64_t step, double loss, bool full, double bits_per_byte) {
  write_record(f_, {{"kind", "val"}, {"step", step}, {"loss", loss},
                    {"ppl", unit_ == kNatsPerToken ? nlohmann::json(std::exp(loss)) : nlohmann::json(nullptr)},
                    {"bpb", bits_per_byte},
                    {"full", full}});
}

ProgressLine::ProgressLine(bool enabled) : tty_(enabled && ::isatty(STDERR_FILENO) == 1) {
  if (tty_) util::set_before_log([this] { clear(); });
}

ProgressLine::~ProgressLine() {
  if (!tty_) return;
  util::set_before_log(nullptr);
  clear();
}

void ProgressLine::update(int64_t step, int64_t total, double loss, double lr, double tokens_per_s,
                          double secs_per_step) {
  if (!tty_) return;
  const auto eta = static_cast<int64_t>(secs_per_step * static_cast<double>(total - step));
  std::fprintf(stderr, "\r\033[Kstep %lld/%lld | loss %.4f | lr %.2e | %.0f tok/s | ETA %lldm%02llds",
               static_cast<long long>(step), static_cast<long long>(total), loss, lr, tokens_per_s,
               static_cast<long long>(eta / 60), static_cast<long long>(eta % 60));
  std::fflush(stderr);
  shown_ = true;
}

void ProgressLine::clear() {
  if (!tty_ || !shown_) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
  shown_ = false;
}

}  // namespace lm::train
