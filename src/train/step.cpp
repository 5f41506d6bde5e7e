#include "train/step.h"

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

}  // namespace lm::train
