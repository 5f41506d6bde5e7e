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

void log_model_summary(const model::GptImpl& m, const DecayGroups& g, const TrainJob& job, int world_size,
                       const model::ExecutionPlan& plan) {
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
    const c10::ScalarType ns = plan.muon_products.value_or(torch::kFloat);
    spdlog::info("muon group: {} tensors / {} params (the blocks' 2-D matrices) at muon_lr {}, momentum {}, {} "
                 "Newton-Schulz steps in {} ({}), no weight decay", g.muon.size(), g.muon_numel, job.train.muon_lr,
                 job.train.muon_momentum, job.train.muon_ns_steps, util::precision_name(ns), plan.muon_why);
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

// A few added pieces with the old pieces their rows started from.
void log_new_rows(const RunData& data, NewRowsInit init) {
  const auto& e = data.extension;
  std::string shown;
  for (size_t i = 0, n = 0; i < e.pieces.size() && n < 4; ++i) {
    const auto& p = e.pieces[i];
    if (p.intermediate || (i > 0 && n > 0 && i % std::max<size_t>(1, e.pieces.size() / 4) != 0)) continue;
    std::vector<std::string> from;
    for (int32_t id : p.from) from.push_back(data.tokenizer.piece(id));
    shown += fmt::format("{}{} ({}) <- {}", n++ ? "; " : "", p.piece, p.id, util::join(from, " + "));
  }
  spdlog::info("new rows: {} rows (ids {}-{}) start as {}{}: {}", e.pieces.size(), e.old_vocab, e.vocab_size() - 1,
               to_string(init),
               init == NewRowsInit::kPieces ? " (the mean of the old rows of the pieces each was split into)"
               : init == NewRowsInit::kMean ? " (the mean of all old rows)"
                                            : " (N(0, 0.02), as pretraining)",
               shown);
}

model::Gpt build_model(const TrainJob& job, const RunData& data, const torch::Device& device, model::OpsPtr ops) {
  model::GptConfig arch = job.model;
  arch.vocab_size = data.tokenizer.vocab_size();
  torch::manual_seed(job.run.seed);
  model::Gpt model(arch, std::move(ops));
  model->train();
  if (!job.init_from.empty() && job.resume_from.empty()) {
    // An untied model started from a tied checkpoint takes its head from the token table (untie_head).
    auto stored = checkpoint::read_weights(job.init_from, arch.tie_embeddings ? checkpoint::MissingHead::kRefuse
                                                                              : checkpoint::MissingHead::kFromTokEmb);
    if (job.new_pieces.active()) {  // new_pieces: the added pieces' rows start from what the model knows
      grow_tables(stored, data.extension, job.new_rows_init, job.run.seed);
      log_new_rows(data, job.new_rows_init);
    }
    checkpoint::copy_weights(*model, stored, job.init_from.string());
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

util::RunPrecisions run_precision(const TrainJob& job, const torch::Device& device) {
  const util::Precision products = job.run.precision, muon = job.train.muon_precision;
  // A resume keeps what its checkpoint trained in, for each precision under auto that it recorded.
  checkpoint::TrainerState was;
  if (!job.resume_from.empty()) was = checkpoint::read_trainer_state(job.resume_from);
  auto dtype = [](const std::string& name) { return name == "bf16" ? torch::kBFloat16 : torch::kFloat; };
  auto kept = [&](util::Precision p, const std::string& name) -> std::optional<util::PrecisionChoice> {
    if (p != util::Precision::kAuto || (name != "fp32" && name != "bf16")) return std::nullopt;
    return util::PrecisionChoice{dtype(name), "auto: as the run began"};
  };
  const auto kept_products = kept(products, was.precision), kept_muon = kept(muon, was.muon_precision);
  // bf16 needs oneDNN in the build for the fused set, which auto and fused pick on a CPU
  const bool bf16_usable = job.run.kernels == util::Kernels::kReference || model::fused_bf16_built();
  auto choose = [&] {
    const util::RunPrecisions c = util::choose_precisions(products, muon, device, bf16_usable);
    return util::precision_name(c.products.dtype) + "\n" + c.products.why + "\n" + util::precision_name(c.muon.dtype) +
           "\n" + c.muon.why;
  };
  // Measured (auto on a CPU, not kept): on rank 0 only, every rank taking its answer.
  const bool measured = device.is_cpu() && ((products == util::Precision::kAuto && !kept_products) ||
                                            (muon == util::Precision::kAuto && !kept_muon));
  const std::string chosen = measured && job.group ? job.group->on_root("precision", choose) : choose();
  const std::vector<std::string> part = util::split(chosen, '\n');
  return {kept_products ? *kept_products : util::PrecisionChoice{dtype(part.at(0)), part.at(1)},
          kept_muon ? *kept_muon : util::PrecisionChoice{dtype(part.at(2)), part.at(3)}};
}

model::ExecutionPlan run_plan(const TrainJob& job, const torch::Device& device, const util::RunPrecisions& precisions,
                              int cores) {
  model::ExecutionPlan plan =
      model::make_ops(job.run.kernels, device, precisions.products.dtype, job.model, job.run.threads, cores);
  plan.muon_products = precisions.muon.dtype;
  plan.muon_why = precisions.muon.why;
  return plan;
}

}  // namespace lm::train
