#include "model/fused/fused_ops.h"

#include <ATen/Parallel.h>

#include "model/fused/balance.h"
#include "model/fused/kernels.h"

namespace lm::model::fused {

namespace {

// The kernels read raw CPU float32 memory; anything else (a model moved after it was built) takes the
// reference ops.
bool cpu_float(const torch::Tensor& x) { return x.device().is_cpu() && x.scalar_type() == torch::kFloat; }

// A single row (decoding) stays on the reference set's matrix-vector product.
bool several_rows(const torch::Tensor& x) { return cpu_float(x) && x.numel() != x.size(-1); }

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
  return several_rows(x) ? kernels::linear(x, w, b, copy_of(w)) : ReferenceOps::linear(x, w, b);
}

torch::Tensor FusedOps::linear_act(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
                                   MlpActivation act) const {
  // The activation applied inside the product's threads (kernels::linear_act).
  if (several_rows(x)) return kernels::linear_act(x, w, b, act, copy_of(w));
  return ReferenceOps::linear_act(x, w, b, act);
}

torch::Tensor FusedOps::prepare_qk(const torch::Tensor& qkv, int64_t heads, bool qk_norm, const torch::Tensor& cos,
                                   const torch::Tensor& sin) const {
  if (!cpu_float(qkv)) return ReferenceOps::prepare_qk(qkv, heads, qk_norm, cos, sin);
  return kernels::prepare_qk(qkv, heads, qk_norm, cos, sin);  // (B,T,3C)
}

torch::Tensor FusedOps::attention(const torch::Tensor& qkv, int64_t heads, const KvLayer* cache) const {
  if (cache || qkv.size(1) < 2 || !cpu_float(qkv)) return ReferenceOps::attention(qkv, heads, cache);
  return kernels::causal_attention(qkv, heads);  // (B,T,C)
}

torch::Tensor FusedOps::embedding(const torch::Tensor& table, const torch::Tensor& ids) const {
  // A tied table's sparse gradient rows are summed with the head's dense gradient (kernels::embedding).
  return tied_ && cpu_float(table) ? kernels::embedding(table, ids) : ReferenceOps::embedding(table, ids);
}

torch::Tensor FusedOps::next_token_loss(const torch::Tensor& hidden, const torch::Tensor& w,
                                        const torch::Tensor& targets, double softcap) const {
  if (!cpu_float(hidden)) return ReferenceOps::next_token_loss(hidden, w, targets, softcap);
  return kernels::next_token_loss(hidden, w, targets, softcap, copy_of(w));
}

torch::Tensor FusedOps::mm(const torch::Tensor& a, const torch::Tensor& b) const {
  return cpu_float(a) ? kernels::mm(a, b) : ReferenceOps::mm(a, b);
}

std::string FusedOps::describe_threads() const {
  return "fused kernels' thread shares: " + kernels::balance::describe(at::get_num_threads());
}

}  // namespace lm::model::fused
