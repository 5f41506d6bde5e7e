#include "train/trainer.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>

#include "checkpoint/checkpoint.h"
#include "data/batcher.h"
#include "data/prepare.h"
#include "model/gpt.h"
#include "train/evaluate.h"
#include "train/lr_schedule.h"
#include "train/optimizer.h"
#include "util/errors.h"
#include "util/fs.h"
#include "util/threads.h"

namespace lm::train {
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
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
  spdlog::info("threads {}, device cpu, batch {} x {} = {} tokens/step", job.threads, job.train.batch_size,
               a.max_seq_len, job.train.batch_size * a.max_seq_len);
}

}  // namespace

void prepare_run_data(const TrainJob& job) {
  RunPaths paths(job.run_dir);
  fs::create_directories(job.run_dir);
  auto t0 = Clock::now();
  if (tokenizer::ensure_tokenizer(job.train_text, paths.tokenizer, job.tokenizer, job.threads)) {
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
  // A new run never silently replaces an earlier run's checkpoints.
  if (auto old = checkpoint::list_checkpoints(job.run_dir); !old.empty()) {
    if (!job.overwrite) {
      throw ConfigError("[train] run.dir '" + job.run_dir.string() + "' already holds " + std::to_string(old.size()) +
                        " checkpoint(s), newest " + old.back().filename().string() +
                        ": expected a new or empty run directory. Hint: choose another run.dir, or pass "
                        "--overwrite to delete them.");
    }
    for (auto& dir : old) fs::remove_all(dir);
    fs::remove(job.run_dir / "latest");
    spdlog::warn("--overwrite: deleted {} checkpoint(s) of an earlier run in {}", old.size(), job.run_dir.string());
  }
  util::set_compute_threads(job.threads);
  prepare_run_data(job);
  RunPaths paths(job.run_dir);
  tokenizer::Tokenizer tok(paths.tokenizer);
  data::TokenFile train_file(paths.train_bin), val_file(paths.val_bin);
  util::atomic_write_file(job.run_dir / "config.yaml", job.config_yaml);

  model::GptConfig arch = job.model;
  arch.vocab_size = tok.vocab_size();
  torch::manual_seed(job.seed);
  model::Gpt model(arch);
  model->train();
  DecayGroups groups = split_decay_groups(*model);
  auto opt = make_adamw(groups, job.train);
  log_model_summary(*model, groups, job);
  spdlog::info("data: train {} tokens, val {} tokens", train_file.size(), val_file.size());

  data::Batcher batcher(train_file, job.train.batch_size, arch.max_seq_len, job.seed);
  std::vector<torch::Tensor> params = groups.decay;
  params.insert(params.end(), groups.no_decay.begin(), groups.no_decay.end());
  const double clip = job.train.grad_clip > 0 ? job.train.grad_clip : std::numeric_limits<double>::infinity();

  checkpoint::TrainerState state;
  auto save = [&](int64_t step) {
    checkpoint::SaveRequest req{model.get(), opt.get(), state, job.config_yaml, paths.tokenizer};
    auto dir = checkpoint::save_checkpoint(job.run_dir, checkpoint::step_name(step), req);
    checkpoint::prune_checkpoints(job.run_dir, job.checkpoint.keep_last);
    spdlog::info("checkpoint: {}", dir.string());
    return dir;
  };

  const int64_t tokens_per_step = job.train.batch_size * arch.max_seq_len;
  auto window_start = Clock::now();
  int64_t window_steps = 0;
  double loss_sum = 0.0;
  fs::path last_ckpt;
  for (int64_t step = 0; step < job.train.max_steps; ++step) {
    const double lr = lr_at(step, job.train);
    set_lr(*opt, lr);
    auto batch = batcher.next();
    auto loss = model->loss(batch.x, batch.y);                   // () mean nats/token
    opt->zero_grad();
    loss.backward();
    const double gnorm = torch::nn::utils::clip_grad_norm_(params, clip);
    const double loss_v = loss.item<double>();
    if (!std::isfinite(loss_v) || !std::isfinite(gnorm)) {
      throw NonFiniteError("[train] non-finite value at step " + std::to_string(step + 1) + ": loss " +
                           std::to_string(loss_v) + ", grad norm " + std::to_string(gnorm) +
                           "; no update was made. Last checkpoint: " +
                           (last_ckpt.empty() ? std::string("none") : last_ckpt.string()) +
                           ". Hint: lower train.lr or enable train.grad_clip.");
    }
    opt->step();
    state.step = step + 1;
    state.tokens_seen += tokens_per_step;
    state.data_cursor = batcher.cursor();
    loss_sum += loss_v;
    ++window_steps;

    if (state.step % job.train.log_every == 0 || state.step == job.train.max_steps) {
      const double secs = seconds_since(window_start);
      spdlog::info("step {}/{} | loss {:.4f} | lr {:.3e} | grad_norm {:.3f} | {:.0f} tok/s", state.step,
                   job.train.max_steps, loss_sum / static_cast<double>(window_steps), lr, gnorm,
                   static_cast<double>(window_steps * tokens_per_step) / std::max(secs, 1e-9));
      window_start = Clock::now();
      window_steps = 0;
      loss_sum = 0.0;
    }
    const bool last = state.step == job.train.max_steps;
    if (!last && job.train.eval_every > 0 && state.step % job.train.eval_every == 0) {
      state.last_val_loss = evaluate(*model, val_file, job.train.batch_size, job.train.eval_batches);
      if (!(state.best_val_loss <= state.last_val_loss)) state.best_val_loss = state.last_val_loss;
      spdlog::info("eval step {} | val loss {:.4f} | val ppl {:.2f} ({} windows)", state.step, state.last_val_loss,
                   std::exp(state.last_val_loss), job.train.eval_batches);
      window_start = Clock::now();
    }
    if (!last && job.checkpoint.every > 0 && state.step % job.checkpoint.every == 0) {
      last_ckpt = save(state.step);
      window_start = Clock::now();
    }
  }

  TrainResult result;
  result.steps = state.step;
  auto t0 = Clock::now();
  state.last_val_loss = evaluate(*model, val_file, job.train.batch_size, 0);
  if (!(state.best_val_loss <= state.last_val_loss)) state.best_val_loss = state.last_val_loss;
  result.final_val_loss = state.last_val_loss;
  spdlog::info("final validation over all {} windows of {}: loss {:.4f} nats/token, perplexity {:.2f} ({:.1f}s)",
               data::eval_window_count(val_file, arch.max_seq_len), paths.val_bin.string(), result.final_val_loss,
               std::exp(result.final_val_loss), seconds_since(t0));
  result.checkpoint = save(state.step);
  return result;
}

}  // namespace lm::train
