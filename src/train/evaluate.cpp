#include "train/evaluate.h"

#include "data/batcher.h"
#include "util/errors.h"

namespace lm::train {

double evaluate(model::GptImpl& model, const data::TokenFile& file, int64_t batch_size, int64_t max_windows) {
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
  double sum = 0.0;
  for (int64_t i = 0; i < n; i += batch_size) {
    const int64_t b = std::min(batch_size, n - i);
    auto batch = data::eval_batch(file, T, std::vector<int64_t>(windows.begin() + i, windows.begin() + i + b));
    auto loss = model.loss(batch.x, batch.y);  // mean over b*T tokens
    sum += loss.item<double>() * static_cast<double>(b);
  }
  model.train(was_training);
  return sum / static_cast<double>(n);
}

}  // namespace lm::train
