// What a person watching a run sees: RUN/metrics.jsonl (one JSON record per logged step and per
// validation) and, on a terminal, one live progress line (step/total, loss, lr, tokens/s, ETA).
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

namespace lm::train {

/// Appends JSON Lines records: {"kind":"train","step","loss","lr","grad_norm","tokens_per_s","tokens_seen"}
/// and {"kind":"val","step","loss","ppl","bpb","full"}, where full is true for the final validation over the
/// whole val file and false for the periodic ones (train.eval_batches batches). Losses keep full double
/// precision. Every record has "time" (Unix seconds); a process that starts a run writes {"kind":"start",
/// "step":0,"loss_unit"} first, and one that resumes writes {"kind":"resume","step":N,"loss_unit"}, so readers
/// (the report, plot) can mark resumed segments, add up the wall time and label the losses. loss_unit is
/// "nats/token" for the next-token loss; for any other (a contrastive fine-tune's) "ppl" is null.
inline constexpr const char* kNatsPerToken = "nats/token";

class MetricsLog {
 public:
  /// Opens `path` for appending. When resuming at `resume_step` > 0, records after that step (from the
  /// interrupted process) are dropped first, so the file reads as if the run had never stopped;
  /// resume_step == 0 starts a new file. An empty `path` writes nothing (ranks other than 0).
  MetricsLog(const std::filesystem::path& path, int64_t resume_step, std::string loss_unit = kNatsPerToken);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  void train(int64_t step, double loss, double lr, double grad_norm, double tokens_per_s, int64_t tokens_seen);
  void val(int64_t step, double loss, bool full, double bits_per_byte);

 private:
  std::FILE* f_ = nullptr;
  std::string unit_;
};

/// The live progress line; a no-op unless stderr is a terminal and `enabled` (rank 0 only). While it
/// exists, every log line erases it first (util::set_before_log), and it erases itself when destroyed.
class ProgressLine {
 public:
  explicit ProgressLine(bool enabled = true);
  ~ProgressLine();
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;
  /// Redraws "step s/total | loss | lr | tok/s | ETA". `secs_per_step` estimates the ETA.
  void update(int64_t step, int64_t total, double loss, double lr, double tokens_per_s, double secs_per_step);
  /// Erases the line so other output (stdout) can be printed cleanly.
  void clear();

 private:
  bool tty_ = false;
  bool shown_ = false;
};

}  // namespace lm::train
