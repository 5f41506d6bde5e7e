#include "model/fused/fused_ops.h"

#include <ATen/Parallel.h>

#include "model/fused/balance.h"
#include "model/fused/kernels.h"

namespace lm::model::fused {

namespace {

// A single row (decoding) stays on the reference set's matrix-vector product.
bool several_rows(const torch::Tensor& x) { return x.numel() != x.size(-1); }

}  // namespace

std::string unsupported(const GptConfig& arch) {
  // Implemented: every position scheme (rope and qk_norm in kernels::prepare_qk, before the fused
  // attention), either embedding scale, a tied or untied head, either activation (inside the fc product's
  // threads), with or without biases, a soft-capped loss; the init keys change no computation. An option
  // added to the reference layers and not written here is named here.
  (void)arch;
  return "";
}

torch::Tensor FusedOps::linear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) const {
  return several_rows(x) ? kernels::linear(scheduler_, x, w, b, copy_of(w)) : ReferenceOps::linear(x, w, b);
}

torch::Tensor FusedOps::linear_act(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
                                   MlpActivation act) const {
  // The activation applied inside the product's threads (kernels::linear_act).
  if (several_rows(x)) return kernels::linear_act(scheduler_, x, w, b, act, copy_of(w));
  return ReferenceOps::linear_act(x, w, b, act);
}

torch::Tensor FusedOps::prepare_qk(const torch::Tensor& qkv, int64_t heads, bool qk_norm, const torch::Tensor& cos,
                                   const torch::Tensor& sin) const {
  return kernels::prepare_qk(qkv, heads, qk_norm, cos, sin);  // (B,T,3C)
}

torch::Tensor FusedOps::attention(const torch::Tensor& qkv, int64_t heads, const KvLayer* cache) const {
  if (cache || qkv.size(1) < 2) return ReferenceOps::attention(qkv, heads, cache);
  return kernels::causal_attention(qkv, heads);  // (B,T,C)
}

torch::Tensor FusedOps::embedding(const torch::Tensor& table, const torch::Tensor& ids) const {
  // A tied table's sparse gradient rows are summed with the head's dense gradient (kernels::embedding).
  return tied_ ? kernels::embedding(table, ids) : ReferenceOps::embedding(table, ids);
}

torch::Tensor FusedOps::next_token_loss(const torch::Tensor& hidden, const torch::Tensor& w,
                                        const torch::Tensor& targets, double softcap) const {
  return kernels::next_token_loss(scheduler_, hidden, w, targets, softcap, copy_of(w));
}

torch::Tensor FusedOps::mm(const torch::Tensor& a, const torch::Tensor& b) const {
  return kernels::mm(*scheduler_, a, b);
}

std::string FusedOps::describe_threads() const {
  return "fused kernels' thread shares: " + kernels::balance::describe(at::get_num_threads());
}

}  // namespace lm::model::fused
