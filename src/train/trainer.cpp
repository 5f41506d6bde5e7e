#include "train/trainer.h"

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <thread>

#include "checkpoint/checkpoint.h"
#include "checkpoint/rng_state.h"
#include "data/batcher.h"
#include "model/gpt.h"
#include "train/evaluate.h"
#include "train/finetune.h"
#include "train/lr_schedule.h"
#include "train/metrics.h"
#include "train/optimizer.h"
#include "train/resume.h"
#include "train/run_data.h"
#include "train/step.h"
#include "util/device.h"
#include "util/clock.h"
#include "util/errors.h"
#include "util/fs.h"
#include "util/signals.h"
#include "util/text.h"
#include "util/threads.h"

namespace lm::train {
namespace fs = std::filesystem;

namespace {

using util::Clock;
using util::seconds_since;

void log_model_summary(const model::GptImpl& m, const DecayGroups& g, const TrainJob& job) {
  int64_t total = 0;
  for (auto& [name, p] : model::named_weights(m)) total += p.numel();
  const auto& a = m.config();
  const int64_t emb = a.vocab_size * a.d_model;
  spdlog::info("model: {} parameters, token embedding {} ({:.1f}%), head {}, positions {}, embedding_scale {}",
               total, emb, 100.0 * static_cast<double>(emb) / static_cast<double>(total),
               a.tie_embeddings ? "tied to tok_emb (no extra tensor)" : "untied (head.weight)",
               model::to_string(a.positions), model::to_string(a.embedding_scale));
  spdlog::info("arch: V={} C={} L={} H={} T={} mlp={}x", a.vocab_size, a.d_model, a.n_layers, a.n_heads,
               a.max_seq_len, a.mlp_ratio);
  spdlog::info("decay groups: {} tensors / {} params with weight_decay={}; {} tensors / {} params without ({})",
               g.decay.size(), g.decay_numel, job.train.weight_decay, g.no_decay.size(), g.no_decay_numel,
               g.no_decay.size() > 6 ? "embeddings, LayerNorm, biases" : util::join(g.no_decay_names, ", "));
  if (!g.embedding.empty()) {
    spdlog::info("embedding group: {} tensors / {} params without weight decay at {} x lr ({})", g.embedding.size(),
                 g.embedding_numel, g.embedding_lr_scale, util::join(g.embedding_names, ", "));
  }
  spdlog::info("threads {}, device {}, effective batch {} x {} micro-batches x {} tokens = {} tokens/step",
               job.threads, m.device().str(), job.train.batch_size, job.train.grad_accum, a.max_seq_len,
               job.train.batch_size * job.train.grad_accum * a.max_seq_len);
}

// A fresh model of the job's architecture (seeded, initialised on the CPU so a seed gives the same weights
// on every device), with a fine-tune's starting weights when not resuming, then moved to `device`.
model::Gpt build_model(const TrainJob& job, const RunData& data, const torch::Device& device, c10::ScalarType dtype) {
  model::GptConfig arch = job.model;
  arch.vocab_size = data.tokenizer.vocab_size();
  torch::manual_seed(job.seed);
  model::Gpt model(arch);
  model->train();
  if (!job.init_from.empty() && job.resume_from.empty()) {
    // An untied model started from a tied checkpoint takes its head from the token table (untie_head).
    checkpoint::load_weights(*model, job.init_from, /*head_from_tok_emb=*/!arch.tie_embeddings);
    spdlog::info("fine-tuning from {}; optimizer state starts fresh, with this config's warmup and schedule",
                 job.init_from.string());
  }
  model->to(device);
  model->set_compute_dtype(dtype);
  return model;
}

std::unique_ptr<torch::optim::AdamW> build_optimizer(const TrainJob& job, const DecayGroups& groups,
                                                     const Freezer& freezer) {
  if (!freezer.unfrozen_later().empty()) {
    spdlog::info("unfreeze_embeddings_after {}: {} frozen for steps 1-{}, then trained at {} x lr with fresh AdamW state",
                 job.unfreeze_after, util::join(freezer.unfrozen_later(), ", "), job.unfreeze_after,
                 job.embedding_lr_scale);
  }
  if (!groups.embedding.empty() && job.embedding_lr_scale != 1.0) {
    spdlog::info("embedding lr scale {}: {} at {} x lr", job.embedding_lr_scale,
                 util::join(groups.embedding_names, ", "), job.embedding_lr_scale);
  }
  return make_adamw(groups, job.train);
}

// The trainer state to start from: a resumed run's (weights, AdamW moments and RNG restored too), or a
// fresh one. Either way it records the identity of this run's data.
checkpoint::TrainerState restore(const TrainJob& job, const RunData& data, model::GptImpl& model,
                                 torch::optim::AdamW& opt) {
  checkpoint::TrainerState state;
  if (!job.resume_from.empty()) {
    state = checkpoint::read_trainer_state(job.resume_from);
    check_data_identity(state.data, data.identity);
    checkpoint::load_weights(model, job.resume_from);
    checkpoint::load_optimizer(opt, model, job.resume_from);
    checkpoint::restore_torch_rng_state(state.torch_rng_state);
    spdlog::info("resumed from {} at step {} ({} tokens seen)", job.resume_from.string(), state.step,
                 state.tokens_seen);
  }
  state.data = data.identity;
  return state;
}

/// One run: the set-up is the constructor, the loop is run(), top to bottom.
class Trainer {
 public:
  Trainer(const TrainJob& job, RunData data, const torch::Device& device, c10::ScalarType dtype)
      : job_(job),
        data_(std::move(data)),
        model_(build_model(job, data_, device, dtype)),
        freezer_(*model_, job.freeze, job.unfreeze, job.unfreeze_after),
        groups_(split_decay_groups(*model_, job.embedding_lr_scale, freezer_.unfrozen_later())),
        opt_(build_optimizer(job, groups_, freezer_)),
        state_(restore(job, data_, *model_, *opt_)),
        first_step_(state_.step),
        batcher_(data_.train, job.train.batch_size, model_->config().max_seq_len, job.seed),
        params_(groups_.all()),
        metrics_(job.run_dir / "metrics.jsonl", state_.step),
        last_ckpt_(job.resume_from) {
    freezer_.start(*model_, first_step_);  // after any resume load: these are the values to prove
    log_model_summary(*model_, groups_, job_);
    spdlog::info("data: train {} tokens, val {} tokens", data_.train.size(), data_.val.size());
    batcher_.set_cursor(state_.data_cursor);
    run_start_ = window_start_ = Clock::now();  // tokens/s counts the steps only
  }

  TrainResult run() {
    bool early_stopped = state_.early_stopped;  // a resumed early-stopped run does not train on
    if (early_stopped) spdlog::info("this run stopped early at step {}; not training further", state_.step);
    while (!early_stopped && state_.step < job_.train.max_steps) {
      freezer_.unfreeze_if_due(*model_, state_.step, job_.embedding_lr_scale);
      const double lr = lr_at(state_.step, job_.train);
      set_lr(*opt_, lr, groups_);
      const auto [loss, grad_norm] = optimizer_step();
      record_step(loss, lr, grad_norm);
      if (state_.step == job_.train.max_steps) break;  // the final validation and save follow the loop
      if (due(job_.train.eval_every)) early_stopped = validate_and_keep_best();
      if (early_stopped) break;
      if (job_.on_report && due(job_.report_every)) report(false);
      const bool saved = due(job_.checkpoint.every);
      if (saved) save_step_checkpoint(false);
      stop_if_signalled(saved);
    }
    return finish(early_stopped);
  }

 private:
  bool due(int64_t every) const { return every > 0 && state_.step % every == 0; }

  // Forward and backward over grad_accum micro-batches, clip, then AdamW; for a non-finite loss or
  // gradient norm no update is made (on_nonfinite: skip) or the run stops (stop).
  std::pair<double, double> optimizer_step() {
    double loss = accumulate_gradients(*model_, batcher_, job_.train.grad_accum);
    if (state_.step + 1 == job_.faults.nan_step) loss = poison_gradients();
    const double clip = job_.train.grad_clip > 0 ? job_.train.grad_clip : std::numeric_limits<double>::infinity();
    const double grad_norm = torch::nn::utils::clip_grad_norm_(params_, clip);
    if (std::isfinite(loss) && std::isfinite(grad_norm)) {
      opt_->step();
      state_.consecutive_skips = 0;
    } else {
      skip_or_stop(loss, grad_norm);
      opt_->zero_grad();
    }
    if (job_.faults.step_delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(job_.faults.step_delay_ms));
    return {loss, grad_norm};
  }

  // Test builds (util/faults.h): what a diverged step looks like, NaN in the loss and every gradient.
  double poison_gradients() {
    for (auto& p : params_) {
      if (p.grad().defined()) p.grad().fill_(std::numeric_limits<float>::quiet_NaN());
    }
    return std::numeric_limits<double>::quiet_NaN();
  }

  void skip_or_stop(double loss, double grad_norm) {
    const std::string what = "[train] non-finite value at step " + std::to_string(state_.step + 1) + ": loss " +
                             std::to_string(loss) + ", grad norm " + std::to_string(grad_norm) +
                             "; no update was made. Last valid checkpoint: " +
                             (last_ckpt_.empty() ? std::string("none") : last_ckpt_.string());
    if (job_.train.on_nonfinite == NonFinitePolicy::kStop || state_.consecutive_skips >= job_.train.max_skips) {
      throw NonFiniteError(what + ". Hint: lower train.lr, or resume from that checkpoint.");
    }
    ++state_.consecutive_skips;
    spdlog::warn("{}; skipped ({} of at most {} in a row)", what, state_.consecutive_skips, job_.train.max_skips);
  }

  // Counts the step, redraws the progress line, and every log_every steps (and at the last) logs the mean
  // loss of the window and appends it to metrics.jsonl.
  void record_step(double loss, double lr, double grad_norm) {
    const int64_t tokens_per_step = job_.train.batch_size * job_.train.grad_accum * model_->config().max_seq_len;
    state_.step += 1;
    state_.tokens_seen += tokens_per_step;
    state_.data_cursor = batcher_.cursor();
    if (std::isfinite(loss)) {  // a skipped step's NaN stays out of the printed average
      state_.log_window_loss_sum += loss;
      ++state_.log_window_steps;
    }
    ++window_steps_;
    const double secs_per_step = seconds_since(run_start_) / static_cast<double>(state_.step - first_step_);
    progress_.update(state_.step, job_.train.max_steps, loss, lr,
                     static_cast<double>(tokens_per_step) / std::max(secs_per_step, 1e-9), secs_per_step);
    if (state_.step % job_.train.log_every != 0 && state_.step != job_.train.max_steps) return;
    const double tps = static_cast<double>(window_steps_ * tokens_per_step) / std::max(seconds_since(window_start_), 1e-9);
    const double mean = state_.log_window_steps > 0
                            ? state_.log_window_loss_sum / static_cast<double>(state_.log_window_steps)
                            : std::numeric_limits<double>::quiet_NaN();
    spdlog::info("step {}/{} | loss {:.9g} | lr {:.3e} | grad_norm {:.3f} | {:.0f} tok/s", state_.step,
                 job_.train.max_steps, mean, lr, grad_norm, tps);
    metrics_.train(state_.step, mean, lr, grad_norm, tps, state_.tokens_seen);
    window_start_ = Clock::now();
    window_steps_ = 0;
    state_.log_window_loss_sum = 0.0;
    state_.log_window_steps = 0;
  }

  // Periodic validation; a new best is saved as RUN/best (a failed save is logged, not fatal).
  // Returns true when early stopping ends the run.
  bool validate_and_keep_best() {
    const Validation v = validate(*model_, data_.val, job_.train, state_);
    metrics_.val(state_.step, v.loss, /*full=*/false);
    if (v.improved) {
      try {
        save("best", false);
      } catch (const SaveError& e) {
        spdlog::error("{} (training continues)", e.what());
      }
    }
    window_start_ = Clock::now();  // tokens/s counts training time only
    return v.stop;
  }

  fs::path save(const std::string& name, bool update_latest) {
    state_.data_cursor = batcher_.cursor();
    state_.torch_rng_state = checkpoint::torch_rng_state_hex();
    checkpoint::SaveRequest req{model_.get(), opt_.get(), state_, job_.config_yaml, data_.paths.tokenizer,
                                update_latest, job_.faults};
    auto dir = checkpoint::save_checkpoint(job_.run_dir, name, req);
    spdlog::info("checkpoint: {}", dir.string());
    return dir;
  }

  // Step checkpoints: an older one is pruned only after the new one is committed. A failed save is logged
  // and training goes on with the previous checkpoint intact; only the final save's failure is fatal.
  void save_step_checkpoint(bool final_save) {
    try {
      last_ckpt_ = save(checkpoint::step_name(state_.step), true);
      checkpoint::prune_checkpoints(job_.run_dir, job_.checkpoint.keep_last);
    } catch (const SaveError& e) {
      if (final_save) throw;
      spdlog::error("{} (previous checkpoint {} is intact; training continues)", e.what(),
                    last_ckpt_.empty() ? "none" : last_ckpt_.string());
    }
    window_start_ = Clock::now();
  }

  // SIGINT/SIGTERM arrived during the step: save (unless this step just did) and stop.
  void stop_if_signalled(bool saved) {
    const int sig = util::stop_signal();
    if (sig == 0) return;
    if (!saved) save_step_checkpoint(true);
    throw Interrupted(util::exit_code_for_signal(sig),
                      "[train] stopped by " + std::string(util::signal_name(sig)) + " after step " +
                          std::to_string(state_.step) + "; saved " + last_ckpt_.string() +
                          ". Hint: continue with `lmtrain train ... --resume auto`.");
  }

  void report(bool final) {
    progress_.clear();  // the report prints to stdout
    job_.on_report(*model_, state_.step, final);
  }

  // The final validation over the whole val file, the last checkpoint, the frozen proof, the report.
  TrainResult finish(bool early_stopped) {
    TrainResult result;
    result.steps = state_.step;
    result.early_stopped = early_stopped;
    const auto t0 = Clock::now();
    state_.last_val_loss = result.final_val_loss = evaluate(*model_, data_.val, job_.train.batch_size, 0);
    metrics_.val(state_.step, result.final_val_loss, /*full=*/true);
    spdlog::info("final validation over all {} windows of {}: loss {:.4f} nats/token, perplexity {:.2f} ({:.1f}s)",
                 data::eval_window_count(data_.val, model_->config().max_seq_len), data_.paths.val_bin.string(),
                 result.final_val_loss, std::exp(result.final_val_loss), seconds_since(t0));
    save_step_checkpoint(true);
    result.checkpoint = last_ckpt_;
    freezer_.check_unchanged(*model_);
    if (job_.on_report) report(true);
    return result;
  }

  const TrainJob& job_;
  RunData data_;
  model::Gpt model_;
  Freezer freezer_;
  DecayGroups groups_;
  std::unique_ptr<torch::optim::AdamW> opt_;
  checkpoint::TrainerState state_;
  const int64_t first_step_;  ///< steps done before this process started
  data::Batcher batcher_;
  std::vector<torch::Tensor> params_;  ///< every parameter the optimizer steps, for clipping
  MetricsLog metrics_;
  ProgressLine progress_;
  fs::path last_ckpt_;  ///< newest committed step checkpoint (the resume source until one is saved)
  Clock::time_point run_start_, window_start_;  ///< for tokens/s of this process
  int64_t window_steps_ = 0;
};

}  // namespace

TrainResult run_training(const TrainJob& job) {
  util::set_compute_threads(job.threads);
  const torch::Device device = util::resolve_device(job.device);  // a missing GPU is refused before anything else
  const c10::ScalarType dtype = util::compute_dtype(job.precision, device);
  if (job.deterministic) util::use_deterministic_algorithms();
  spdlog::info("device {}, precision {}{}", util::describe_device(device), util::precision_name(dtype),
               job.deterministic ? ", deterministic algorithms" : "");
  check_run_start(job);  // before any tensor is loaded or file written
  util::install_stop_handlers();
  prepare_run_data(job);
  RunData data(job.run_dir);
  util::atomic_write_file(job.run_dir / "config.yaml", job.config_yaml);
  Trainer trainer(job, std::move(data), device, dtype);
  return trainer.run();
}

}  // namespace lm::train
