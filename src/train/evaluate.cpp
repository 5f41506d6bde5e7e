#include "train/evaluate.h"

#include <spdlog/spdlog.h>

#include <cmath>
#include <limits>

#include "data/batcher.h"
#include "dist/group.h"
#include "train/metrics.h"
#include "util/errors.h"

namespace lm::train {

EvalResult evaluate(model::GptImpl& model, const data::TokenFile& file, int64_t batch_size, int64_t max_windows,
                    dist::Group* group, const std::function<bool()>& stop, const torch::Tensor& bytes_per_id) {
  const int64_t T = model.config().max_seq_len;
  const int64_t total = data::eval_window_count(file, T);
  if (total == 0) {
    throw DataError("[eval] validation file '" + file.path().string() + "' too small: expected at least " +
                    std::to_string(T + 1) + " tokens, got " + std::to_string(file.size()));
  }
  const int64_t n = (max_windows > 0 && max_windows < total) ? max_windows : total;
  std::vector<int64_t> windows(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) windows[i] = i * total / n;  // evenly spread
  torch::NoGradGuard no_grad;
  const bool was_training = model.is_training();
  model.eval();
  // With W ranks, rank r evaluates the r-th contiguous share of the windows; the sums are added up.
  const int64_t W = group ? group->size() : 1, r = group ? group->rank() : 0;
  const int64_t begin = n * r / W, end = n * (r + 1) / W;
  double sum = 0.0, bytes = 0.0;
  for (int64_t i = begin; i < end; i += batch_size) {
    if (stop && stop()) {
      model.train(was_training);
      return {};
    }
    const int64_t b = std::min(batch_size, end - i);
    auto batch = data::eval_batch(file, T, std::vector<int64_t>(windows.begin() + i, windows.begin() + i + b));
    auto loss = model.forward(batch.x, batch.y);  // mean over b*T tokens
    sum += loss.item<double>() * static_cast<double>(b);
    if (bytes_per_id.defined()) bytes += static_cast<double>(bytes_per_id.index_select(0, batch.y.reshape(-1).cpu()).sum().item<int64_t>());
  }
  model.train(was_training);
  if (group) {
    auto totals = torch::tensor({sum, bytes}, torch::kFloat64);
    group->allreduce_sum(totals);
    sum = totals[0].item<double>();
    bytes = totals[1].item<double>();
  }
  EvalResult result;
  result.loss = sum / static_cast<double>(n);
  // sum is the sum over windows of each window's mean: sum * T nats in all.
  if (bytes_per_id.defined() && bytes > 0) result.bits_per_byte = sum * static_cast<double>(T) / std::log(2.0) / bytes;
  return result;
}

}  // namespace lm::train

namespace lm::train {

Validation judge_validation(double loss, double bits_per_byte, const TrainConfig& cfg, checkpoint::TrainerState& state,
                            const std::string& loss_unit) {
  const bool nats = loss_unit == kNatsPerToken;
  Validation v;
  v.loss = state.last_val_loss = loss;
  v.bits_per_byte = state.last_val_bpb = bits_per_byte;
  v.improved = !(state.best_val_loss - 1e-6 <= v.loss);  // also true while best is NaN (no validation yet)
  const std::string bpb = std::isnan(bits_per_byte) ? std::string() : fmt::format(" | {:.4f} bits/byte", bits_per_byte);
  spdlog::info("eval step {} | {} {:.4f}{}{} ({} batches){}", state.step, nats ? "val loss" : "val loss (" + loss_unit + ")",
               v.loss, nats ? fmt::format(" | val ppl {:.2f}", std::exp(v.loss)) : std::string(), bpb,
               cfg.eval_batches, v.improved ? " | best so far" : "");
  if (v.improved) {
    state.best_val_loss = v.loss;
    state.evals_without_improvement = 0;
  } else if (++state.evals_without_improvement >= cfg.early_stopping_patience && cfg.early_stopping_patience > 0) {
    spdlog::info("early stopping: {} validations without improvement", state.evals_without_improvement);
    v.stop = state.early_stopped = true;
  }
  return v;
}

Validation validate(model::GptImpl& model, const data::TokenFile& val, const TrainConfig& cfg,
                    checkpoint::TrainerState& state, dist::Group* group, const torch::Tensor& bytes_per_id) {
  const EvalResult r = evaluate(model, val, cfg.batch_size, cfg.eval_batches, group, nullptr, bytes_per_id);
  return judge_validation(r.loss, r.bits_per_byte, cfg, state, kNatsPerToken);
}

}  // namespace lm::train
