// TrainConfig: optimisation settings (YAML section `train`). Steps are optimizer steps.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "util/device_config.h"

namespace lm::train {

/// What to do when a step's loss or gradient norm is NaN/Inf (no update is ever made from it).
enum class NonFinitePolicy {
  kStop,  ///< exit 5, naming the step and the last valid checkpoint
  kSkip,  ///< skip the update; exit 5 after more than max_skips in a row
};
NonFinitePolicy parse_nonfinite_policy(std::string_view s);  ///< "stop" | "skip"; throws ConfigError
std::string to_string(NonFinitePolicy p);

/// Which optimizer steps the transformer blocks' 2-D weight matrices (train.optimizer).
enum class OptimizerKind {
  kAdamW,  ///< AdamW for every parameter
  kMuon,   ///< Muon (train/muon.h) for the blocks' 2-D matrices, AdamW for embeddings, head, LayerNorms, biases
};
OptimizerKind parse_optimizer_kind(std::string_view s);  ///< "adamw" | "muon"; throws ConfigError
std::string to_string(OptimizerKind k);

struct TrainConfig {
  int64_t batch_size = 16;      ///< sequences per micro-batch (per process); each is model.max_seq_len tokens
  int64_t grad_accum = 1;       ///< micro-batches per optimizer step (gradients averaged); >= 1
  int64_t max_steps = 2000;     ///< optimizer steps to run; >= 1
  OptimizerKind optimizer = OptimizerKind::kAdamW;
  double lr = 1e-3;             ///< peak learning rate after warmup; > 0 (AdamW; Muon follows its schedule)
  double muon_lr = 0.02;        ///< Muon's peak learning rate; its schedule is lr's, scaled by muon_lr / lr
  double muon_momentum = 0.95;  ///< Muon's (Nesterov) momentum; [0, 1)
  int64_t muon_ns_steps = 5;    ///< Newton-Schulz iterations per update; >= 1
  /// dtype of the Newton-Schulz products (util::choose_precisions): auto = bf16 on CUDA >= 8.0 and on a CPU
  /// with bf16 instructions where a bf16 product measures >= 1.3x fp32's at start-up, else fp32
  util::Precision muon_precision = util::Precision::kAuto;
  double min_lr = 1e-4;         ///< floor of the cosine decay; 0 <= min_lr <= lr
  int64_t warmup_steps = 100;   ///< linear warmup from lr/warmup_steps to lr; 0 <= warmup_steps <= max_steps
  double weight_decay = 0.1;    ///< AdamW decoupled decay, applied to 2-D matmul weights only
  double beta1 = 0.9;           ///< AdamW first-moment decay; [0, 1)
  double beta2 = 0.95;          ///< AdamW second-moment decay; [0, 1)
  double eps = 1e-8;            ///< AdamW denominator epsilon; > 0
  double grad_clip = 1.0;       ///< global L2 gradient-norm limit; 0 disables clipping
  int64_t eval_every = 250;     ///< steps between validations; 0 = only at the end
  int64_t eval_batches = 20;    ///< batches per periodic validation (the final one reads the whole val file)
  int64_t log_every = 10;       ///< steps between training log lines; >= 1
  int64_t early_stopping_patience = 0;  ///< stop after this many validations without improvement (a drop
                                        ///< of more than 1e-6 nats below the best); 0 = off
  NonFinitePolicy on_nonfinite = NonFinitePolicy::kStop;
  int64_t max_skips = 3;        ///< with on_nonfinite: skip, consecutive skipped steps allowed
};

}  // namespace lm::train
