// The fused CPU set of the model's operations (docs/ARCHITECTURE.md "The model's operations"): the
// kernels of kernels.h behind the Ops interface, for CPU training on fp32 weights and activations with fp32
// or bf16 products (the product dtype dispatched inside each operation: bf16 reads the weights' copies from
// model/weight_copies.h). The device, the dtypes and the CPU's AVX2 + FMA are settled once, when
// model/make_ops.cpp (the only builder) chooses this set; no operation checks them again. What the kernels do
// not cover (a single row, a cache) goes to the reference set they derive from; an architecture they do not
// implement is refused before a model is built (unsupported()).
#pragma once

#include <memory>
#include <string>

#include "model/fused/balance.h"
#include "model/gpt_config.h"
#include "model/ops.h"
#include "model/weight_copies.h"

namespace lm::model::fused {

/// Why the fused set cannot compute `arch` (naming the config key), or "" when it implements it. Every
/// architecture option the reference layers read must either be implemented here or refused here.
std::string unsupported(const GptConfig& arch);

/// The fused set for models of one architecture (whether the token table is also the head decides the lookup),
/// with products in `dtype`: kFloat, or kBFloat16 reading `copies` (not null then). It owns the scheduler
/// that cuts its products among the threads by their measured speeds (balance.h).
class FusedOps : public ReferenceOps {
 public:
  FusedOps(const GptConfig& arch, c10::ScalarType dtype = torch::kFloat, std::shared_ptr<WeightCopies> copies = nullptr)
      : ReferenceOps(dtype),
        tied_(arch.tie_embeddings),
        copies_(std::move(copies)),
        scheduler_(c10::make_intrusive<kernels::balance::Scheduler>()) {}
  std::string name() const override { return "fused"; }
  torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) const override;
  torch::Tensor linear_act(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
                           MlpActivation act) const override;
  torch::Tensor prepare_qk(const torch::Tensor& qkv, int64_t heads, bool qk_norm, const torch::Tensor& cos,
                           const torch::Tensor& sin) const override;
  torch::Tensor attention(const torch::Tensor& qkv, int64_t heads, const KvLayer* cache) const override;
  torch::Tensor embedding(const torch::Tensor& table, const torch::Tensor& ids) const override;
  torch::Tensor next_token_loss(const torch::Tensor& hidden, const torch::Tensor& w, const torch::Tensor& targets,
                                double softcap) const override;
  torch::Tensor mm(const torch::Tensor& a, const torch::Tensor& b) const override;
  std::string describe_threads() const override;

 private:
  /// w's bf16 copy with bf16 products, else undefined (the kernels then multiply in fp32).
  at::Tensor copy_of(const at::Tensor& w) const { return copies_ ? copies_->of(w) : at::Tensor(); }
  bool tied_;  ///< the table is also the output head (kernels::embedding's gradient needs the head's beside it)
  std::shared_ptr<WeightCopies> copies_;
  kernels::balance::SchedulerPtr scheduler_;
};

}  // namespace lm::model::fused
