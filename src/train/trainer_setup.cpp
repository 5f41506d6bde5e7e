#include "train/trainer_setup.h"

#include <spdlog/spdlog.h>

#include "checkpoint/rng_state.h"
#include "dist/group.h"
#include "train/resume.h"
#include "util/device.h"
#include "util/errors.h"
#include "util/text.h"
#include "util/threads.h"

namespace lm::train {

void log_model_summary(const model::GptImpl& m, const DecayGroups& g, const TrainJob& job, int world_size) {
  int64_t total = 0;
  for (auto& [name, p] : model::named_weights(m)) total += p.numel();
  const auto& a = m.config();
  const int64_t emb = a.vocab_size * a.d_model;
  spdlog::info("model: {} parameters, token embedding {} ({:.1f}%), head {}, positions {}, embedding_scale {}",
               total, emb, 100.0 * static_cast<double>(emb) / static_cast<double>(total),
               a.tie_embeddings ? "tied to tok_emb (no extra tensor)" : "untied (head.weight)",
               model::to_string(a.positions), model::to_string(a.embedding_scale));
  spdlog::info("arch: {}", model::describe(a));
  spdlog::info("decay groups: {} tensors / {} params with weight_decay={}; {} tensors / {} params without ({})",
               g.decay.size(), g.decay_numel, job.train.weight_decay, g.no_decay.size(), g.no_decay_numel,
               g.no_decay.size() > 6 ? "embeddings, LayerNorm, biases" : util::join(g.no_decay_names, ", "));
  if (!g.muon.empty()) {
    const c10::ScalarType ns = util::muon_dtype(job.train.muon_precision, g.muon.front().device());
    spdlog::info("muon group: {} tensors / {} params (the blocks' 2-D matrices) at muon_lr {}, momentum {}, {} "
                 "Newton-Schulz steps in {}{}, no weight decay", g.muon.size(), g.muon_numel, job.train.muon_lr,
                 job.train.muon_momentum, job.train.muon_ns_steps, util::precision_name(ns),
                 job.train.muon_precision != util::Precision::kAuto ? ""
                 : ns == c10::kBFloat16 ? " (auto: this device multiplies bf16 in hardware)"
                                        : " (auto: no bf16 products in this device's hardware)");
  }
  if (!g.embedding.empty()) {
    spdlog::info("embedding group: {} tensors / {} params without weight decay at {} x lr ({})", g.embedding.size(),
                 g.embedding_numel, g.embedding_lr_scale, util::join(g.embedding_names, ", "));
  }
  const int64_t tokens = world_size * job.train.batch_size * job.train.grad_accum * a.max_seq_len;
  const std::string batch = world_size > 1 ? fmt::format("global batch {} processes x {} sequences", world_size,
                                                         job.train.batch_size)
                                           : fmt::format("effective batch {}", job.train.batch_size);
  spdlog::info("threads {}{} ({} ops, OpenBLAS {}), device {}, {} x {} micro-batches x {} tokens = {} tokens/step",
               torch::get_num_threads(), world_size > 1 ? " per process" : "", m.ops()->name(),
               util::blas_threads(), m.device().str(), batch, job.train.grad_accum, a.max_seq_len, tokens);
  if (const std::string threads = m.ops()->describe_threads(); !threads.empty()) spdlog::info("{}", threads);
}

model::Gpt build_model(const TrainJob& job, const RunData& data, const torch::Device& device, model::OpsPtr ops) {
  model::GptConfig arch = job.model;
  arch.vocab_size = data.tokenizer.vocab_size();
  torch::manual_seed(job.run.seed);
  model::Gpt model(arch, std::move(ops));
  model->train();
  if (!job.init_from.empty() && job.resume_from.empty()) {
    // An untied model started from a tied checkpoint takes its head from the token table (untie_head).
    checkpoint::load_weights(*model, job.init_from,
                             arch.tie_embeddings ? checkpoint::MissingHead::kRefuse : checkpoint::MissingHead::kFromTokEmb);
    spdlog::info("fine-tuning from {}; optimizer state starts fresh, with this config's warmup and schedule",
                 job.init_from.string());
  }
  model->to(device);
  return model;
}

std::unique_ptr<RunOptimizer> build_optimizer(const TrainJob& job, const DecayGroups& groups, const Freezer& freezer,
                                              const model::ExecutionPlan& plan) {
  if (!freezer.unfrozen_later().empty()) {
    spdlog::info("unfreeze_embeddings_after {}: {} frozen for steps 1-{}, then trained at {} x lr with fresh AdamW state",
                 job.unfreeze_after, util::join(freezer.unfrozen_later(), ", "), job.unfreeze_after,
                 job.embedding_lr_scale);
  }
  if (!groups.embedding.empty() && job.embedding_lr_scale != 1.0) {
    spdlog::info("embedding lr scale {}: {} at {} x lr", job.embedding_lr_scale,
                 util::join(groups.embedding_names, ", "), job.embedding_lr_scale);
  }
  return std::make_unique<RunOptimizer>(groups, job.train, plan);
}

checkpoint::TrainerState restore(const TrainJob& job, const RunData& data, model::GptImpl& model, RunOptimizer& opt) {
  checkpoint::TrainerState state;
  if (!job.resume_from.empty()) {
    state = checkpoint::read_trainer_state(job.resume_from);
    check_data_identity(state.data, data.identity);
    checkpoint::load_weights(model, job.resume_from);
    auto momentum = checkpoint::load_optimizer(opt.adamw(), model, job.resume_from);
    if (opt.muon()) {
      opt.muon()->load_state(momentum);
    } else if (!momentum.empty()) {
      throw CheckpointError("[checkpoint] optimizer state of " + job.resume_from.string() + " holds Muon momentum ('" +
                            momentum.begin()->first + "'), but this run steps no parameter with Muon (train.optimizer "
                            "adamw, or every block matrix frozen). Hint: resume with the checkpoint's train.optimizer");
    }
    checkpoint::restore_torch_rng_state(state.torch_rng_state);
    spdlog::info("resumed from {} at step {} ({} tokens seen)", job.resume_from.string(), state.step,
                 state.tokens_seen);
  }
  state.data = data.identity;
  return state;
}

util::PrecisionChoice run_precision(const TrainJob& job, const torch::Device& device) {
  if (job.run.precision == util::Precision::kAuto && !job.resume_from.empty()) {
    const std::string was = checkpoint::read_trainer_state(job.resume_from).precision;
    if (was == "fp32" || was == "bf16") {
      return {was == "bf16" ? torch::kBFloat16 : torch::kFloat, "auto: as the run began"};
    }
  }
  // bf16 needs oneDNN in the build for the fused set, which auto and fused pick on a CPU
  const bool bf16_usable = job.run.kernels == util::Kernels::kReference || model::fused_bf16_built();
  auto choose = [&] {
    const util::PrecisionChoice c = util::choose_precision(job.run.precision, device, bf16_usable);
    return util::precision_name(c.dtype) + "|" + c.why;
  };
  const bool measured = job.run.precision == util::Precision::kAuto && device.is_cpu();
  const std::string chosen = measured && job.group ? job.group->on_root("precision", choose) : choose();
  const size_t bar = chosen.find('|');
  return {chosen.substr(0, bar) == "bf16" ? torch::kBFloat16 : torch::kFloat, chosen.substr(bar + 1)};
}

}  // namespace lm::train
