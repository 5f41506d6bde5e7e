#include "util/logging.h"

#include <spdlog/sinks/sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include <mutex>

namespace lm::util {
namespace {

std::mutex g_hook_mutex;
std::function<void()> g_before_log;

// Forwards every message to the stderr sink, after the hook (the live progress line erases itself).
class HookedSink final : public spdlog::sinks::sink {
 public:
  explicit HookedSink(spdlog::sink_ptr inner) : inner_(std::move(inner)) {}
  void log(const spdlog::details::log_msg& msg) override {
    {
      std::lock_guard<std::mutex> lock(g_hook_mutex);
      if (g_before_log) g_before_log();
    }
    inner_->log(msg);
  }
  void flush() override { inner_->flush(); }
  void set_pattern(const std::string& pattern) override { inner_->set_pattern(pattern); }
  void set_formatter(std::unique_ptr<spdlog::formatter> f) override { inner_->set_formatter(std::move(f)); }

 private:
  spdlog::sink_ptr inner_;
};

}  // namespace

void setup_logging(bool verbose) {
  auto sink = std::make_shared<HookedSink>(std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
  auto logger = std::make_shared<spdlog::logger>("lmtrain", sink);
  logger->set_pattern("[%H:%M:%S] [%^%l%$] %v");
  logger->set_level(verbose ? spdlog::level::debug : spdlog::level::info);
  spdlog::set_default_logger(logger);
}

void set_log_rank(int rank) {
  auto logger = spdlog::default_logger();
  logger->set_pattern("[%H:%M:%S] [rank " + std::to_string(rank) + "] [%^%l%$] %v");
  if (rank != 0 && logger->level() > spdlog::level::debug) logger->set_level(spdlog::level::warn);
}

void set_before_log(std::function<void()> fn) {
  std::lock_guard<std::mutex> lock(g_hook_mutex);
  g_before_log = std::move(fn);
}

}  // namespace lm::util
