// Validation: mean next-token loss over non-overlapping windows of a token file, and the periodic
// validation of a training run with its early-stopping rule.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>

#include "checkpoint/checkpoint.h"
#include "data/token_file.h"
#include "model/gpt.h"
#include "train/train_config.h"

namespace lm::dist {
class Group;
}

namespace lm::train {

/// What an evaluation measured.
struct EvalResult {
  double loss = NAN;           ///< mean nats per target token
  /// Total nats / ln 2 / the UTF-8 bytes the target tokens decode to (tokenizer::decoded_bytes_per_id):
  /// comparable across vocabularies. NaN when no byte table was given.
  double bits_per_byte = NAN;
};

/// Loss over up to `max_windows` windows spread evenly through the file (0 = all of them), `batch_size`
/// windows per forward pass, in eval mode without gradients; bits per byte too when `bytes_per_id` (a
/// [V] int64 tensor) is given. With a `group`, every rank evaluates its share of the windows and all
/// ranks return the same totals. `stop`, when given, is asked before each batch; once it says true,
/// evaluate returns NaN at once (a signal during the final validation). Throws DataError when the file
/// holds fewer than max_seq_len + 1 tokens; DistributedError.
EvalResult evaluate(model::GptImpl& model, const data::TokenFile& file, int64_t batch_size, int64_t max_windows,
                    dist::Group* group = nullptr, const std::function<bool()>& stop = nullptr,
                    const torch::Tensor& bytes_per_id = {});

/// What a periodic validation decided.
struct Validation {
  double loss = 0.0;      ///< over cfg.eval_batches batches, nats/token
  double bits_per_byte = NAN;
  bool improved = false;  ///< a new best: the caller saves `best`
  bool stop = false;      ///< cfg.early_stopping_patience validations in a row without improvement
};

/// The bookkeeping of a periodic validation that measured `loss` (and bits per byte, or NaN) in `loss_unit`
/// (train/metrics.h: kNatsPerToken, or a contrastive fine-tune's): logs it, with the perplexity only for
/// nats/token, and updates the state's last and best loss, its patience counter and early_stopped.
Validation judge_validation(double loss, double bits_per_byte, const TrainConfig& cfg, checkpoint::TrainerState& state,
                            const std::string& loss_unit);

/// The periodic validation after step state.step: evaluates, logs the result, and updates the state's
/// last and best loss, its patience counter and early_stopped. Improvement means lower than the best by
/// more than float32 round-off of a mean loss (1e-6 nats).
Validation validate(model::GptImpl& model, const data::TokenFile& val, const TrainConfig& cfg,
                    checkpoint::TrainerState& state, dist::Group* group = nullptr,
                    const torch::Tensor& bytes_per_id = {});

}  // namespace lm::train
