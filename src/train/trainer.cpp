#include "train/trainer.h"

#include <ATen/CPUGeneratorImpl.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "checkpoint/checkpoint.h"
#include "data/batcher.h"
#include "data/prepare.h"
#include "model/gpt.h"
#include "train/evaluate.h"
#include "train/finetune.h"
#include "train/lr_schedule.h"
#include "train/metrics.h"
#include "train/optimizer.h"
#include "train/resume.h"
#include "train/step.h"
#include "util/errors.h"
#include "util/fs.h"
#include "util/hash.h"
#include "util/signals.h"
#include "util/threads.h"

namespace lm::train {
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::string join_names(const std::vector<std::string>& names) {
  std::string out;
  for (auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

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
  std::string nd;
  for (auto& n : g.no_decay_names) nd += (nd.empty() ? "" : ", ") + n;
  spdlog::info("decay groups: {} tensors / {} params with weight_decay={}; {} tensors / {} params without ({})",
               g.decay.size(), g.decay_numel, job.train.weight_decay, g.no_decay.size(), g.no_decay_numel,
               g.no_decay.size() > 6 ? "embeddings, LayerNorm, biases" : nd);
  if (!g.embedding.empty()) {
    spdlog::info("embedding group: {} tensors / {} params without weight decay at {} x lr ({})", g.embedding.size(),
                 g.embedding_numel, g.embedding_lr_scale, join_names(g.embedding_names));
  }
  spdlog::info("threads {}, device cpu, effective batch {} x {} micro-batches x {} tokens = {} tokens/step",
               job.threads, job.train.batch_size, job.train.grad_accum, a.max_seq_len,
               job.train.batch_size * job.train.grad_accum * a.max_seq_len);
}

std::string rng_state_hex() {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  auto t = gen.get_state().contiguous();
  return util::to_hex(t.data_ptr(), t.nbytes());
}

void set_rng_state_hex(const std::string& hex) {
  if (hex.empty()) return;
  const std::string bytes = util::from_hex(hex);
  auto t = torch::empty({static_cast<int64_t>(bytes.size())}, torch::kUInt8);
  std::memcpy(t.data_ptr(), bytes.data(), bytes.size());
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(t);
}

// Test-only hooks, read from the environment: LMTRAIN_TEST_NAN_STEP=N poisons the loss of step N (1-based)
// to exercise the non-finite guard; LMTRAIN_TEST_STEP_DELAY_MS=D sleeps D ms after each step so a test can
// deliver a signal mid-run.
int64_t test_hook(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v ? std::atoll(v) : fallback;
}

}  // namespace

void prepare_run_data(const TrainJob& job) {
  RunPaths paths(job.run_dir);
  fs::create_directories(job.run_dir);
  auto t0 = Clock::now();
  if (!job.init_from.empty()) {
    // Fine-tuning keeps the checkpoint's tokenizer: the token table rows mean those pieces.
    const fs::path src = job.init_from / "tokenizer.model";
    if (!fs::is_regular_file(paths.tokenizer) || util::sha256_file(paths.tokenizer) != util::sha256_file(src)) {
      util::atomic_write_file(paths.tokenizer, util::read_file(src, "checkpoint tokenizer"));
    }
    spdlog::info("tokenizer: {} (from {})", paths.tokenizer.string(), job.init_from.string());
  } else if (tokenizer::ensure_tokenizer(job.train_text, paths.tokenizer, job.tokenizer, job.threads)) {
    spdlog::info("tokenizer: trained {} {} pieces on {} in {:.1f}s -> {}", tokenizer::to_string(job.tokenizer.model_type),
                 job.tokenizer.vocab_size, job.train_text.string(), seconds_since(t0), paths.tokenizer.string());
  } else {
    spdlog::info("tokenizer: {} is current", paths.tokenizer.string());
  }
  tokenizer::Tokenizer tok(paths.tokenizer);
  for (auto [text, bin] : {std::pair{job.train_text, paths.train_bin}, std::pair{job.val_text, paths.val_bin}}) {
    if (data::token_file_is_current(text, tok, bin)) {
      spdlog::info("prepare: {} is current", bin.string());
      continue;
    }
    t0 = Clock::now();
    auto info = data::prepare_corpus(text, tok, bin);
    spdlog::info("prepare: {} -> {} ({} tokens, {}-byte ids, {:.1f}s)", text.string(), bin.string(), info.count,
                 info.id_bytes, seconds_since(t0));
  }
}

TrainResult run_training(const TrainJob& job) {
  const fs::path resume_from = select_resume_checkpoint(job.run_dir, job.resume, job.overwrite);
  if (!resume_from.empty()) {
    preflight_resume(job, resume_from);  // before any tensor is loaded
  } else if (auto old = checkpoint::list_checkpoints(job.run_dir); !old.empty()) {
    // A new run never silently replaces an earlier run's checkpoints.
    if (!job.overwrite) {
      throw ConfigError("[train] run.dir '" + job.run_dir.string() + "' already holds " + std::to_string(old.size()) +
                        " checkpoint(s), newest " + old.back().filename().string() +
                        ": expected a new or empty run directory. Hint: --resume auto continues it, --overwrite "
                        "deletes it, or choose another run.dir.");
    }
    for (auto& dir : old) fs::remove_all(dir);
    fs::remove_all(job.run_dir / "best");
    fs::remove(job.run_dir / "latest");
    spdlog::warn("--overwrite: deleted {} checkpoint(s) of an earlier run in {}", old.size(), job.run_dir.string());
  }
  util::set_compute_threads(job.threads);
  util::install_stop_handlers();
  prepare_run_data(job);
  if (const int sig = util::stop_signal(); sig != 0) {  // Ctrl-C during tokenizer training or encoding
    throw Interrupted(static_cast<ExitCode>(util::exit_code_for_signal(sig)),
                      "[train] stopped by " + std::string(sig == SIGTERM ? "SIGTERM" : "SIGINT") +
                          " during data preparation, before any step; no checkpoint was written (finished tokenizer "
                          "and token files are kept and reused)");
  }
  RunPaths paths(job.run_dir);
  tokenizer::Tokenizer tok(paths.tokenizer);
  data::TokenFile train_file(paths.train_bin), val_file(paths.val_bin);
  checkpoint::DataIdentity identity{tok.sha256(), train_file.info().source_sha256, val_file.info().source_sha256,
                                    train_file.size(), val_file.size()};
  util::atomic_write_file(job.run_dir / "config.yaml", job.config_yaml);

  model::GptConfig arch = job.model;
  arch.vocab_size = tok.vocab_size();
  torch::manual_seed(job.seed);
  model::Gpt model(arch);
  model->train();
  if (!job.init_from.empty() && resume_from.empty()) {
    // An untied model started from a tied checkpoint takes its head from the token table (untie_head).
    checkpoint::load_weights(*model, job.init_from / "model.pt", /*head_from_tok_emb=*/!arch.tie_embeddings);
    spdlog::info("fine-tuning from {}; optimizer state starts fresh, with this config's warmup and schedule",
                 job.init_from.string());
  }
  std::vector<std::string> frozen = apply_freeze(*model, job.freeze);
  std::vector<std::string> later = names_with_prefix(frozen, job.unfreeze);  // unfrozen after job.unfreeze_after steps
  if (!frozen.empty()) {
    int64_t n_frozen = 0, n_trainable = 0;
    for (auto& [name, p] : model::named_weights(*model)) (p.requires_grad() ? n_trainable : n_frozen) += p.numel();
    spdlog::info("frozen: {} parameters ({}); trainable: {} parameters", n_frozen, join_names(frozen), n_trainable);
    if (arch.tie_embeddings && std::find(frozen.begin(), frozen.end(), "tok_emb.weight") != frozen.end()) {
      spdlog::info("tied head: freezing tok_emb.weight also freezes the output projection (logits use the same matrix)");
    }
  }
  DecayGroups groups = split_decay_groups(*model, job.embedding_lr_scale, later);
  if (!later.empty()) {
    spdlog::info("unfreeze_embeddings_after {}: {} frozen for steps 1-{}, then trained at {} x lr with fresh AdamW state",
                 job.unfreeze_after, join_names(later), job.unfreeze_after, job.embedding_lr_scale);
  }
  if (!groups.embedding.empty() && job.embedding_lr_scale != 1.0) {
    spdlog::info("embedding lr scale {}: {} at {} x lr", job.embedding_lr_scale, join_names(groups.embedding_names),
                 job.embedding_lr_scale);
  }
  auto opt = make_adamw(groups, job.train);
  checkpoint::TrainerState state;
  if (!resume_from.empty()) {
    state = checkpoint::read_trainer_state(resume_from);
    check_data_identity(state.data, identity);
    checkpoint::load_weights(*model, resume_from / "model.pt");
    checkpoint::load_optimizer(*opt, *model, resume_from);
    set_rng_state_hex(state.torch_rng_state);
    spdlog::info("resumed from {} at step {} ({} tokens seen)", resume_from.string(), state.step, state.tokens_seen);
  }
  state.data = identity;
  const int64_t first_step = state.step;  // where this process starts
  auto frozen_before = hash_parameters(*model, frozen);  // after any resume load: these are the start values
  log_model_summary(*model, groups, job);
  spdlog::info("data: train {} tokens, val {} tokens", train_file.size(), val_file.size());

  data::Batcher batcher(train_file, job.train.batch_size, arch.max_seq_len, job.seed);
  batcher.set_cursor(state.data_cursor);
  std::vector<torch::Tensor> params = groups.decay;
  params.insert(params.end(), groups.no_decay.begin(), groups.no_decay.end());
  params.insert(params.end(), groups.embedding.begin(), groups.embedding.end());
  const double clip = job.train.grad_clip > 0 ? job.train.grad_clip : std::numeric_limits<double>::infinity();
  MetricsLog metrics(job.run_dir / "metrics.jsonl", state.step);
  ProgressLine progress;
  // Unfreezing (finetune.unfreeze_embeddings_after): the frozen proof of those tensors ends here. A process
  // resumed at or past the unfreeze step has nothing to prove: the tensors trained before it started.
  auto unfreeze = [&] {
    const bool resumed_past = first_step >= job.unfreeze_after;
    const auto now = hash_parameters(*model, later);
    for (auto& name : later) {
      if (!resumed_past && frozen_before.at(name) != now.at(name)) {
        throw Error(ExitCode::kInternal, "[finetune] frozen tensor " + name + " changed before it was unfrozen");
      }
      frozen_before.erase(name);
      frozen.erase(std::find(frozen.begin(), frozen.end(), name));
    }
    for (auto& [name, p] : model::named_weights(*model)) {
      if (std::find(later.begin(), later.end(), name) != later.end()) p.requires_grad_(true);
    }
    progress.clear();
    const bool tied_head = arch.tie_embeddings && std::count(later.begin(), later.end(), "tok_emb.weight") > 0;
    if (resumed_past) {
      spdlog::info("resumed at step {}, at or after the unfreeze at step {}: {} trains", first_step, job.unfreeze_after,
                   join_names(later));
    } else {
      spdlog::info("step {}: unfroze {} (SHA-256 unchanged over steps {}-{}); it trains from here at {} x lr{}",
                   state.step, join_names(later), first_step + 1, state.step, job.embedding_lr_scale,
                   tied_head ? ", and with it the tied output projection" : "");
    }
    later.clear();
  };
  fs::path last_ckpt = resume_from;

  auto save = [&](const std::string& name, bool update_latest) {
    state.data_cursor = batcher.cursor();
    state.torch_rng_state = rng_state_hex();
    checkpoint::SaveRequest req{model.get(), opt.get(), state, job.config_yaml, paths.tokenizer, update_latest};
    auto dir = checkpoint::save_checkpoint(job.run_dir, name, req);
    progress.clear();
    spdlog::info("checkpoint: {}", dir.string());
    return dir;
  };
  // Step checkpoints: an older one is pruned only after the new one is committed. A failed save is logged
  // and training goes on with the previous checkpoint intact; only the final save's failure is fatal.
  auto save_step = [&](bool final_save) {
    try {
      last_ckpt = save(checkpoint::step_name(state.step), true);
      checkpoint::prune_checkpoints(job.run_dir, job.checkpoint.keep_last);
    } catch (const SaveError& e) {
      if (final_save) throw;
      progress.clear();
      spdlog::error("{} (previous checkpoint {} is intact; training continues)", e.what(),
                    last_ckpt.empty() ? "none" : last_ckpt.string());
    }
  };

  const int64_t accum = job.train.grad_accum;
  const int64_t tokens_per_step = job.train.batch_size * accum * arch.max_seq_len;
  const int64_t nan_step = test_hook("LMTRAIN_TEST_NAN_STEP", -1);
  const int64_t step_delay_ms = test_hook("LMTRAIN_TEST_STEP_DELAY_MS", 0);
  auto window_start = Clock::now();
  auto run_start = Clock::now();
  int64_t window_steps = 0;  // for tokens/s of this process only
  bool early_stopped = state.early_stopped;  // a resumed early-stopped run does not train on
  if (early_stopped) spdlog::info("this run stopped early at step {}; not training further", state.step);
  while (!early_stopped && state.step < job.train.max_steps) {
    if (!later.empty() && state.step >= job.unfreeze_after) unfreeze();
    const double lr = lr_at(state.step, job.train);
    set_lr(*opt, lr, groups);
    const double step_loss = accumulate_gradients(*model, batcher, accum, state.step + 1 == nan_step);
    const double gnorm = torch::nn::utils::clip_grad_norm_(params, clip);
    if (!std::isfinite(step_loss) || !std::isfinite(gnorm)) {
      const std::string what = "[train] non-finite value at step " + std::to_string(state.step + 1) + ": loss " +
                                std::to_string(step_loss) + ", grad norm " + std::to_string(gnorm) +
                                "; no update was made. Last valid checkpoint: " +
                                (last_ckpt.empty() ? std::string("none") : last_ckpt.string());
      if (job.train.on_nonfinite == NonFinitePolicy::kStop || state.consecutive_skips >= job.train.max_skips) {
        throw NonFiniteError(what + ". Hint: lower train.lr, or resume from that checkpoint.");
      }
      ++state.consecutive_skips;
      progress.clear();
      spdlog::warn("{}; skipped ({} of at most {} in a row)", what, state.consecutive_skips, job.train.max_skips);
      opt->zero_grad();
    } else {
      opt->step();
      state.consecutive_skips = 0;
    }
    if (step_delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(step_delay_ms));
    state.step += 1;
    state.tokens_seen += tokens_per_step;
    state.data_cursor = batcher.cursor();
    if (std::isfinite(step_loss)) {  // a skipped step's NaN stays out of the printed average
      state.log_window_loss_sum += step_loss;
      ++state.log_window_steps;
    }
    ++window_steps;
    const double secs_per_step = seconds_since(run_start) / static_cast<double>(state.step - first_step);
    progress.update(state.step, job.train.max_steps, step_loss, lr,
                    static_cast<double>(tokens_per_step) / std::max(secs_per_step, 1e-9), secs_per_step);

    const bool last = state.step == job.train.max_steps;
    if (state.step % job.train.log_every == 0 || last) {
      const double secs = seconds_since(window_start);
      const double tps = static_cast<double>(window_steps * tokens_per_step) / std::max(secs, 1e-9);
      const double mean = state.log_window_steps > 0
                              ? state.log_window_loss_sum / static_cast<double>(state.log_window_steps)
                              : std::numeric_limits<double>::quiet_NaN();
      progress.clear();
      spdlog::info("step {}/{} | loss {:.9g} | lr {:.3e} | grad_norm {:.3f} | {:.0f} tok/s", state.step,
                   job.train.max_steps, mean, lr, gnorm, tps);
      metrics.train(state.step, mean, lr, gnorm, tps, state.tokens_seen);
      window_start = Clock::now();
      window_steps = 0;
      state.log_window_loss_sum = 0.0;
      state.log_window_steps = 0;
    }
    if (!last && job.train.eval_every > 0 && state.step % job.train.eval_every == 0) {
      state.last_val_loss = evaluate(*model, val_file, job.train.batch_size, job.train.eval_batches);
      metrics.val(state.step, state.last_val_loss, /*full=*/false);
      // Improvement means lower by more than float32 round-off of a mean loss (1e-6 nats).
      const bool improved = !(state.best_val_loss - 1e-6 <= state.last_val_loss);
      progress.clear();
      spdlog::info("eval step {} | val loss {:.4f} | val ppl {:.2f} ({} batches){}", state.step, state.last_val_loss,
                   std::exp(state.last_val_loss), job.train.eval_batches, improved ? " | best so far" : "");
      if (improved) {
        state.best_val_loss = state.last_val_loss;
        state.evals_without_improvement = 0;
        try {
          save("best", false);
        } catch (const SaveError& e) {
          progress.clear();
          spdlog::error("{} (training continues)", e.what());
        }
      } else if (++state.evals_without_improvement >= job.train.early_stopping_patience &&
                 job.train.early_stopping_patience > 0) {
        spdlog::info("early stopping: {} validations without improvement", state.evals_without_improvement);
        early_stopped = true;
        state.early_stopped = true;
      }
      window_start = Clock::now();
    }
    if (early_stopped) break;
    if (job.on_report && job.report_every > 0 && state.step % job.report_every == 0 && !last) {
      progress.clear();
      job.on_report(*model, state.step, false);
    }
    const bool ckpt_due = job.checkpoint.every > 0 && state.step % job.checkpoint.every == 0;
    if (!last && ckpt_due) {
      save_step(false);
      window_start = Clock::now();
    }
    if (const int sig = util::stop_signal(); sig != 0 && !last) {
      if (!ckpt_due) save_step(true);
      progress.clear();
      throw Interrupted(static_cast<ExitCode>(util::exit_code_for_signal(sig)),
                        "[train] stopped by " + std::string(sig == SIGTERM ? "SIGTERM" : "SIGINT") + " after step " +
                            std::to_string(state.step) + "; saved " + last_ckpt.string() +
                            ". Hint: continue with `lmtrain train ... --resume auto`.");
    }
  }

  TrainResult result;
  result.steps = state.step;
  result.early_stopped = early_stopped;
  auto t0 = Clock::now();
  state.last_val_loss = evaluate(*model, val_file, job.train.batch_size, 0);
  result.final_val_loss = state.last_val_loss;
  metrics.val(state.step, state.last_val_loss, /*full=*/true);
  progress.clear();
  spdlog::info("final validation over all {} windows of {}: loss {:.4f} nats/token, perplexity {:.2f} ({:.1f}s)",
               data::eval_window_count(val_file, arch.max_seq_len), paths.val_bin.string(), result.final_val_loss,
               std::exp(result.final_val_loss), seconds_since(t0));
  save_step(true);
  result.checkpoint = last_ckpt;
  if (!frozen.empty()) {
    // Proof that freezing held: every frozen tensor hashes as it did before the first step.
    if (hash_parameters(*model, frozen) != frozen_before) {
      throw Error(ExitCode::kInternal, "[finetune] a frozen tensor changed during training");
    }
    spdlog::info("frozen tensors unchanged (SHA-256 before = after): {} tensor(s)", frozen.size());
  }
  if (job.on_report) job.on_report(*model, state.step, true);
  return result;
}

}  // namespace lm::train
