#include "train/step.h"

#include <spdlog/spdlog.h>

#include <limits>
#include <string>

#include "util/errors.h"
#include "util/faults.h"

namespace lm::train {

double accumulate_gradients(model::GptImpl& model, data::Batcher& batcher, int64_t accum,
                            const std::function<void()>& before_last) {
  model.zero_grad(/*set_to_none=*/true);  // the first backward then takes its gradients instead of adding to zeros
  double mean_loss = 0.0;
  for (int64_t micro = 0; micro < accum; ++micro) {
    auto batch = batcher.next();
    auto loss = model.forward(batch.x, batch.y);  // () mean nats/token of this micro-batch
    if (micro + 1 == accum && before_last) before_last();
    (loss / static_cast<double>(accum)).backward();  // mean of equal-size micro-batch means = big-batch mean
    mean_loss += loss.item<double>() / static_cast<double>(accum);
  }
  return mean_loss;
}

double inject_faults(std::vector<torch::Tensor>& params, int64_t step, int rank, double loss) {
  if (util::fault_hooks().nan_at(step, rank)) {  // several ranks: the NaN loss reaches every rank through the agreement
    for (auto& p : params) {
      if (p.grad().defined()) p.grad().fill_(std::numeric_limits<float>::quiet_NaN());
    }
    loss = std::numeric_limits<double>::quiet_NaN();
  }
  if (util::fault_hooks().inf_grad_at(step)) {
    for (auto& p : params) {
      if (p.grad().defined()) {
        p.grad().view(-1)[0].fill_(std::numeric_limits<float>::infinity());
        break;
      }
    }
  }
  return loss;
}

void skip_or_stop(double loss, double grad_norm, int64_t step, const TrainConfig& cfg, int64_t& consecutive_skips,
                  const std::filesystem::path& last_ckpt) {
  const std::string what = "[train] non-finite value at step " + std::to_string(step) + ": loss " +
                           std::to_string(loss) + ", grad norm " + std::to_string(grad_norm) +
                           "; no update was made. Last valid checkpoint: " +
                           (last_ckpt.empty() ? std::string("none") : last_ckpt.string());
  if (cfg.on_nonfinite == NonFinitePolicy::kStop || consecutive_skips >= cfg.max_skips) {
    throw NonFiniteError(what + ". Hint: lower train.lr, or resume from that checkpoint.");
  }
  ++consecutive_skips;
  spdlog::warn("{}; skipped ({} of at most {} in a row)", what, consecutive_skips, cfg.max_skips);
}

}  // namespace lm::train
