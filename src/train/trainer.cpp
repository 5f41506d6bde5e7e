#include "train/trainer.h"

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>

#include "checkpoint/checkpoint.h"
#include "checkpoint/rng_state.h"
#include "data/batcher.h"
#include "data/split.h"
#include "model/gpt.h"
#include "model/make_ops.h"
#include "train/contrastive.h"
#include "train/data_parallel.h"
#include "train/evaluate.h"
#include "train/finetune.h"
#include "train/lr_schedule.h"
#include "train/metrics.h"
#include "train/optimizer.h"
#include "train/resume.h"
#include "train/run_data.h"
#include "train/step.h"
#include "train/trainer_setup.h"
#include "util/device.h"
#include "util/clock.h"
#include "util/errors.h"
#include "util/faults.h"
#include "util/fs.h"
#include "util/signals.h"
#include "util/text.h"
#include "util/threads.h"

namespace lm::train {
namespace fs = std::filesystem;

namespace {

using util::Clock;
using util::seconds_since;

enum class Latest { kUpdate, kKeep };          ///< whether a save moves RUN/latest to it (`best` does not)
enum class SaveFailure { kContinue, kFatal };  ///< a failed step save: logged and training goes on, or fatal

/// One run: the set-up is the constructor, the loop is run(), top to bottom.
class Trainer {
 public:
  Trainer(const TrainJob& job, RunData data, const torch::Device& device, const model::ExecutionPlan& plan)
      : job_(job),
        data_(std::move(data)),
        model_(build_model(job, data_, device, plan.ops)),
        freezer_(*model_, job.freeze, job.unfreeze, job.unfreeze_after,
                 job.freeze_old_rows ? data_.extension.old_vocab : 0),
        groups_(split_decay_groups(*model_, job.embedding_lr_scale, freezer_.unfrozen_later(),
                                   job.train.optimizer == OptimizerKind::kMuon)),
        opt_(build_optimizer(job, groups_, freezer_, plan)),
        muon_precision_(opt_->muon() && plan.muon_products ? util::precision_name(*plan.muon_products) : ""),
        state_(restore(job, data_, *model_, *opt_)),
        dp_(job.group, *model_),  // after the resume load: rank 0's weights are broadcast
        first_step_(state_.step),
        batcher_(data_.train, job.train.batch_size, model_->config().max_seq_len, job.run.seed, dp_.rank(),
                 dp_.world_size()),
        contrastive_(job.contrastive ? std::make_unique<Contrastive>(*job.contrastive, data_.tokenizer,
                                                                     model_->config().max_seq_len, job.train.batch_size,
                                                                     job.run.seed, dp_.rank(), dp_.world_size())
                                     : nullptr),
        params_(groups_.all()),
        metrics_(dp_.is_root() ? job.run_dir() / "metrics.jsonl" : fs::path(), state_.step,
                 contrastive_ ? contrastive_->loss_unit() : kNatsPerToken),
        progress_(dp_.is_root()),
        last_ckpt_(job.resume_from),
        bytes_per_id_(torch::tensor(tokenizer::decoded_bytes_per_id(data_.tokenizer), torch::kInt64)) {
    freezer_.start(*model_, first_step_);  // after any resume load: these are the values to prove
    log_model_summary(*model_, groups_, job_, dp_.world_size(), plan);
    spdlog::info("data: train {} tokens, val {} tokens", data_.train.size(), data_.val.size());
    contrastive_ ? contrastive_->set_cursor(state_.data_cursor) : batcher_.set_cursor(state_.data_cursor);
    if (contrastive_) spdlog::info("{}", contrastive_->describe());
    run_start_ = window_start_ = Clock::now();  // tokens/s counts the steps only
  }

  TrainResult run() {
    bool early_stopped = state_.early_stopped;  // a resumed early-stopped run does not train on
    if (early_stopped) spdlog::info("this run stopped early at step {}; not training further", state_.step);
    while (!early_stopped && state_.step < job_.train.max_steps) {
      bool rows_unfrozen = false;
      if (freezer_.unfreeze_if_due(*model_, state_.step, job_.embedding_lr_scale, &rows_unfrozen)) dp_.retrack();
      if (rows_unfrozen) opt_->restart_state(model_->tok_emb->weight);
      const double lr = lr_at(state_.step, job_.train);
      opt_->set_lr(lr);
      const auto [loss, grad_norm] = optimizer_step();
      record_step(loss, lr, grad_norm);
      if (state_.step == job_.train.max_steps) break;  // the final validation and save follow the loop
      if (due(job_.train.eval_every)) early_stopped = validate_and_keep_best();
      if (early_stopped) break;
      if (job_.on_report && due(job_.report_every)) report(ReportKind::kPeriodic);
      const bool saved = due(job_.checkpoint.every);
      if (saved) save_step_checkpoint(SaveFailure::kContinue);
      stop_if_signalled(saved);
    }
    return finish(early_stopped);
  }

 private:
  bool due(int64_t every) const { return every > 0 && state_.step % every == 0; }
  uint64_t cursor() const { return contrastive_ ? contrastive_->cursor() : batcher_.cursor(); }

  // Forward and backward over grad_accum micro-batches, gradients averaged over ranks, clip, then AdamW;
  // for a non-finite loss or gradient norm (on any rank) no update is made (on_nonfinite: skip) or the run
  // stops (stop), on every rank alike.
  std::pair<double, double> optimizer_step() {
    const std::function<void()> before_last = [this] { dp_.before_last_backward(); };
    double local = contrastive_ ? contrastive_->accumulate(*model_, job_.train.grad_accum, before_last)
                                : accumulate_gradients(*model_, batcher_, job_.train.grad_accum, before_last);
    local = inject_faults(params_, state_.step + 1, dp_.rank(), local);  // test builds only
    const StepAgreement agreed = dp_.after_backward(local);
    freezer_.mask_gradients(*model_);  // finetune.freeze_embeddings old: the old rows get no update
    const double loss = agreed.loss;
    window_comm_s_ += agreed.comm_seconds;
    const double clip = job_.train.grad_clip > 0 ? job_.train.grad_clip : std::numeric_limits<double>::infinity();
    const GradClip clipped = grad_clip(params_, clip);  // the factor is applied by the step
    const double grad_norm = clipped.norm;
    if (std::isfinite(loss) && std::isfinite(grad_norm)) {
      opt_->step(clipped);
      state_.consecutive_skips = 0;
    } else {
      skip_or_stop(loss, grad_norm, state_.step + 1, job_.train, state_.consecutive_skips, last_ckpt_);
      opt_->zero_grad();
    }
    util::fault_hooks().reached("step:" + std::to_string(state_.step + 1));  // test builds may hold here
    return {loss, grad_norm};
  }

  // Counts the step, redraws the progress line, and every log_every steps (and at the last) logs the mean
  // loss of the window and appends it to metrics.jsonl.
  void record_step(double loss, double lr, double grad_norm) {
    const int64_t tokens_per_step = dp_.world_size() * job_.train.batch_size * job_.train.grad_accum * model_->config().max_seq_len;
    state_.step += 1;
    state_.tokens_seen += tokens_per_step;
    state_.data_cursor = cursor();
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
    std::string comm;
    if (dp_.active()) {  // the all-reduce wait the backward pass did not hide, per step and as a share of it
      const double per_step = window_comm_s_ / static_cast<double>(window_steps_);
      comm = fmt::format(" | allreduce wait {:.1f} ms/step ({:.1f}%)", 1e3 * per_step,
                         100.0 * window_comm_s_ / std::max(seconds_since(window_start_), 1e-9));
    }
    spdlog::info("step {}/{} | loss {:.9g} | lr {:.3e} | grad_norm {:.3f} | {:.0f} tok/s{}", state_.step,
                 job_.train.max_steps, mean, lr, grad_norm, tps, comm);
    metrics_.train(state_.step, mean, lr, grad_norm, tps, state_.tokens_seen);
    window_start_ = Clock::now();
    window_steps_ = 0;
    window_comm_s_ = 0.0;
    state_.log_window_loss_sum = 0.0;
    state_.log_window_steps = 0;
  }

  // Periodic validation; a new best is saved as RUN/best (a failed save is logged, not fatal).
  // Returns true when early stopping ends the run.
  bool validate_and_keep_best() {
    const Validation v = contrastive_ ? judge_validation(contrastive_->val_loss(*model_, job_.train.eval_batches, dp_.group()), NAN,
                                                         job_.train, state_, contrastive_->loss_unit())
                                      : validate(*model_, data_.val, job_.train, state_, dp_.group(), bytes_per_id_);
    metrics_.val(state_.step, v.loss, /*full=*/false, v.bits_per_byte);
    if (v.improved && dp_.is_root()) {  // not waited for by the other ranks: `best` is no resume point
      try {
        save("best", Latest::kKeep);
      } catch (const SaveError& e) {
        spdlog::error("{} (training continues)", e.what());
      }
    }
    window_start_ = Clock::now();  // tokens/s counts training time only
    return v.stop;
  }

  fs::path save(const std::string& name, Latest latest) {
    state_.data_cursor = cursor();
    state_.world_size = dp_.world_size();
    state_.torch_rng_state = checkpoint::torch_rng_state_hex();
    state_.precision = util::precision_name(model_->ops()->dtype());
    state_.muon_precision = muon_precision_;
    checkpoint::SaveRequest req{model_.get(), &opt_->adamw(), opt_->muon_state(), state_, job_.config_yaml,
                                data_.paths.tokenizer, latest == Latest::kUpdate, data_.extension_file};
    auto dir = checkpoint::save_checkpoint(job_.run_dir(), name, req);
    spdlog::info("checkpoint: {}", dir.string());
    return dir;
  }

  // Step checkpoints: rank 0 writes, every rank waits for the commit. An older one is pruned only after
  // the new one is committed. A failed save is logged and training goes on with the previous checkpoint
  // intact; only the final save's failure is fatal. Each commit also checks that the ranks agree.
  void save_step_checkpoint(SaveFailure failure) {
    const bool final_save = failure == SaveFailure::kFatal;
    const std::string name = checkpoint::step_name(state_.step);
    try {
      dp_.on_root("save/" + name + (final_save ? "/final" : ""), [&] {
        save(name, Latest::kUpdate);
        checkpoint::prune_checkpoints(job_.run_dir(), job_.checkpoint.keep_last);
      });
      last_ckpt_ = job_.run_dir() / name;
    } catch (const SaveError& e) {
      if (final_save) throw;
      spdlog::error("{} ({}; training continues)", e.what(),
                    last_ckpt_.empty() ? "no earlier checkpoint" : "previous checkpoint " + last_ckpt_.string() + " is intact");
    }
    dp_.check_replicas("step " + std::to_string(state_.step));
    window_start_ = Clock::now();
  }

  // SIGINT/SIGTERM arrived during the step (on any rank: the agreement after the backward pass): save
  // (unless this step just did) and stop, every rank with the same exit code.
  void stop_if_signalled(bool saved) {
    const int sig = dp_.stop_signal();
    if (sig == 0) return;
    if (!saved) save_step_checkpoint(SaveFailure::kFatal);
    throw Interrupted(util::exit_code_for_signal(sig),
                      "[train] stopped by " + std::string(util::signal_name(sig)) + " after step " +
                          std::to_string(state_.step) + "; saved " + last_ckpt_.string() +
                          ". Hint: continue with `lmtrain train ... --resume auto`.");
  }

  void report(ReportKind kind) {
    progress_.clear();  // the report prints to stdout
    dp_.on_root("report/" + std::to_string(state_.step) + (kind == ReportKind::kFinal ? "/final" : ""),
                [&] { job_.on_report(*model_, state_.step, kind); });
  }

  // The final validation over the whole val file, the last checkpoint, the frozen proof, the report.
  TrainResult finish(bool early_stopped) {
    TrainResult result;
    result.steps = state_.step;
    result.early_stopped = early_stopped;
    const auto t0 = Clock::now();
    // One process stops between batches on a signal; ranks of a multi-process run finish it together.
    std::function<bool()> stop;
    if (!dp_.active()) {
      stop = [] {
        util::fault_hooks().reached("eval");  // test builds may hold before the first batch
        return util::stop_signal() != 0;
      };
    }
    const EvalResult r = final_validation(stop);
    if (const int sig = util::stop_signal(); sig != 0 && !dp_.active()) {
      save_step_checkpoint(SaveFailure::kFatal);  // the trained weights first; the checkpoint records no final validation
      throw Interrupted(util::exit_code_for_signal(sig),
                        "[train] stopped by " + std::string(util::signal_name(sig)) + " during the final validation " +
                            "after step " + std::to_string(state_.step) + "; saved " + last_ckpt_.string() +
                            " (no final validation loss). Hint: `lmtrain train ... --resume auto` runs it.");
    }
    state_.last_val_loss = result.final_val_loss = r.loss;
    state_.last_val_bpb = result.final_val_bpb = r.bits_per_byte;
    metrics_.val(state_.step, r.loss, /*full=*/true, r.bits_per_byte);
    if (contrastive_) spdlog::info("final validation: contrastive loss {:.4f} ({:.1f}s)", r.loss, seconds_since(t0));
    if (!contrastive_) {
      spdlog::info("final validation: loss {:.4f} nats/token, perplexity {:.2f}, {:.4f} bits/byte ({:.1f}s)", r.loss,
                   std::exp(r.loss), r.bits_per_byte, seconds_since(t0));
    }
    save_step_checkpoint(SaveFailure::kFatal);
    result.checkpoint = last_ckpt_;
    freezer_.check_unchanged(*model_);
    if (job_.on_report) report(ReportKind::kFinal);
    return result;
  }

  // Over the whole held-out data: the val file's windows (next-token), or every held-out pair (contrastive).
  EvalResult final_validation(const std::function<bool()>& stop) {
    if (contrastive_) {
      spdlog::info("final validation over all {} held-out pairs ...", contrastive_->val_pairs().size());
      return {contrastive_->val_loss(*model_, 0, dp_.group()), NAN};
    }
    spdlog::info("final validation over all {} windows of {} ...",
                 data::eval_window_count(data_.val, model_->config().max_seq_len), data_.paths.val_bin.string());
    return evaluate(*model_, data_.val, job_.train.batch_size, 0, dp_.group(), stop, bytes_per_id_);
  }

  const TrainJob& job_;
  RunData data_;
  model::Gpt model_;
  Freezer freezer_;
  DecayGroups groups_;
  std::unique_ptr<RunOptimizer> opt_;
  const std::string muon_precision_;  ///< Muon's Newton-Schulz precision ("" without Muon), for checkpoints
  checkpoint::TrainerState state_;
  DataParallel dp_;
  const int64_t first_step_;  ///< steps done before this process started
  data::Batcher batcher_;
  std::unique_ptr<Contrastive> contrastive_;  ///< finetune.objective contrastive (else null: next-token steps)
  std::vector<torch::Tensor> params_;  ///< every parameter the optimizer steps, for clipping
  MetricsLog metrics_;
  ProgressLine progress_;
  fs::path last_ckpt_;  ///< newest committed step checkpoint (the resume source until one is saved)
  const torch::Tensor bytes_per_id_;  ///< decoded UTF-8 bytes of each id, for bits per byte
  Clock::time_point run_start_, window_start_;  ///< for tokens/s of this process
  int64_t window_steps_ = 0;
  double window_comm_s_ = 0.0;  ///< all-reduce waits since the last log line
};

}  // namespace

TrainResult run_training(const TrainJob& job) {
  torch::Device device = util::resolve_device(job.run.device);  // a missing GPU is refused before anything else
  if (device.is_cuda() && job.group && job.run.device.index < 0) {
    device = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(job.group->env().local_rank));  // one GPU a rank
  }
  const util::RunPrecisions precisions = run_precision(job, device);
  const int cores = util::resolve_blas_threads(job.run.blas_threads, job.group ? job.group->size() : 1);
  // How the run computes, chosen once (model/make_ops.h) and applied as given.
  const model::ExecutionPlan plan = run_plan(job, device, precisions, cores);
  util::set_compute_threads(plan.torch_threads, plan.blas_threads);
  if (job.run.deterministic) util::use_deterministic_algorithms();
  spdlog::info("device {}, precision {} ({}){}", util::describe_device(device), util::precision_name(plan.products),
               precisions.products.why, job.run.deterministic ? ", deterministic algorithms" : "");
  spdlog::info("{}", plan.why);
  util::install_stop_handlers();
  // Rank 0 checks the start, makes the tokenizer and token files and writes config.yaml; the other ranks
  // wait for it (as long as it takes) and then open the same files.
  auto prepare = [&] {
    // data.unit paragraph: the joined copies every step below reads (the only files written before the check)
    prepare_run_text(job);
    // One training file: its held-out split, made in memory first so that a resume can compare it.
    const std::optional<data::CorpusSplit> split =
        job.split ? std::optional<data::CorpusSplit>(data::split_corpus(*job.split)) : std::nullopt;
    check_run_start(job, split ? &*split : nullptr);  // before any tensor is loaded or other file written
    if (split) {
      fs::create_directories(job.run_dir());
      data::write_split(*split, job.train_files.at(0), job.val_files.at(0));
      spdlog::info("data: {} -> {}", data::describe_split(*split, job.split->source), job.val_files.at(0).string());
    }
    prepare_run_data(job);
    util::atomic_write_file(job.run_dir() / "config.yaml", job.config_yaml);
    return std::string();
  };
  job.group ? job.group->on_root("prepare", prepare) : prepare();
  Trainer trainer(job, run_data(job), device, plan);
  return trainer.run();
}

}  // namespace lm::train
