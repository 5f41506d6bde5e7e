// The operations a model computes with, chosen once when the model is built: the reference set here
// (LibTorch's ops, the model a reader studies), and the fused CPU set in model/fused/, which only
// model/make_ops.cpp builds. The layers call these and nothing else for their products, activation,
// attention, token lookup and loss (docs/ARCHITECTURE.md "The model's operations").
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>

#include "model/gpt_config.h"
#include "model/weight_copies.h"

namespace lm::model {

class KvLayer;

/// The interface both sets implement. Every tensor is on the model's device; the products run in dtype().
class Ops {
 public:
  virtual ~Ops() = default;
  /// "reference" or "fused": the log's name for the set.
  virtual std::string name() const = 0;
  /// The dtype of every matrix product (kFloat, or kBFloat16: bf16 products on fp32 weights, the results
  /// back in fp32, so LayerNorm, softmax and the loss stay fp32). Not part of the architecture: not saved.
  virtual c10::ScalarType dtype() const = 0;
  /// x (..., in) W^T + b -> (..., out); `b` may be undefined.
  virtual torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) const = 0;
  /// act(x W^T + b): the MLP's first layer with its activation (gelu: the erf GELU; relu2: relu(.)^2).
  virtual torch::Tensor linear_act(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
                                   MlpActivation act) const = 0;
  /// q and k of a fused projection qkv (B,T,3C) made ready for the scores, per head of `heads`: scaled to
  /// unit RMS (`qk_norm`: x / sqrt(mean(x^2) + 1e-6), no parameters), then rotated (`cos`, `sin` (T, D/2) of
  /// the rows' positions, model/positions.h rotate_half; undefined = no rotation). v is unchanged -> (B,T,3C).
  virtual torch::Tensor prepare_qk(const torch::Tensor& qkv, int64_t heads, bool qk_norm, const torch::Tensor& cos,
                                   const torch::Tensor& sin) const;
  /// Causal self-attention of a fused projection qkv (B,T,3C) holding q | k | v, `heads` heads -> (B,T,C):
  /// position t attends to positions <= t. With a cache, qkv holds its last T positions S..S+T-1, whose
  /// keys and values the layer has already appended: they attend to every key of the cache, which is only
  /// read (the operations change nothing outside their result).
  virtual torch::Tensor attention(const torch::Tensor& qkv, int64_t heads, const KvLayer* cache) const = 0;
  /// The rows of `table` (V,C) at `ids` (any shape) -> (..., C).
  virtual torch::Tensor embedding(const torch::Tensor& table, const torch::Tensor& ids) const = 0;
  /// Mean next-token cross-entropy in nats of the logits hidden (B,T,C) or (N,C) @ w^T (V,C), soft-capped
  /// to softcap tanh(logits / softcap) when softcap > 0, against targets, without the (B*T, V) logits
  /// existing whole.
  virtual torch::Tensor next_token_loss(const torch::Tensor& hidden, const torch::Tensor& w,
                                        const torch::Tensor& targets, double softcap) const = 0;
  /// a (M,K) @ b (K,N) in fp32, no autograd (Muon's Newton-Schulz products).
  virtual torch::Tensor mm(const torch::Tensor& a, const torch::Tensor& b) const = 0;
  /// One log line about how the set splits its work over the threads, or "" (the reference set).
  virtual std::string describe_threads() const { return ""; }
};

using OpsPtr = std::shared_ptr<const Ops>;

/// The reference set: LibTorch's ops (at::scaled_dot_product_attention with LibTorch >= 2.0), the products
/// in `dtype`. A single row (decoding) takes a matrix-vector product. With `copies` (bf16, for a model whose
/// weights do not change: sampling, embedding, inspection) the products read the weights' bf16 copies, made
/// once, instead of casting every weight on every call.
class ReferenceOps : public Ops {
 public:
  explicit ReferenceOps(c10::ScalarType dtype = torch::kFloat, std::shared_ptr<WeightCopies> copies = nullptr)
      : dtype_(dtype), copies_(std::move(copies)) {}
  std::string name() const override { return "reference"; }
  c10::ScalarType dtype() const override { return dtype_; }
  torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) const override;
  torch::Tensor linear_act(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
                           MlpActivation act) const override;
  torch::Tensor attention(const torch::Tensor& qkv, int64_t heads, const KvLayer* cache) const override;
  torch::Tensor embedding(const torch::Tensor& table, const torch::Tensor& ids) const override;
  torch::Tensor next_token_loss(const torch::Tensor& hidden, const torch::Tensor& w, const torch::Tensor& targets,
                                double softcap) const override;
  torch::Tensor mm(const torch::Tensor& a, const torch::Tensor& b) const override;

 private:
  c10::ScalarType dtype_;
  std::shared_ptr<WeightCopies> copies_;
};

/// The reference set in `dtype` (one shared object per dtype).
OpsPtr reference_ops(c10::ScalarType dtype = torch::kFloat);

/// softmax(q k^T / sqrt(D) + causal mask) v written out op by op, the products in `dtype`, the softmax in
/// fp32. q (B,H,T,D) holds positions S..S+T-1 of k, v (B,H,S+T,D) -> (B,H,T,D).
torch::Tensor attention_reference(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                  c10::ScalarType dtype);

/// logits soft-capped: softcap tanh(logits / softcap), or logits unchanged when softcap is 0.
torch::Tensor soft_cap(const torch::Tensor& logits, double softcap);

/// Mean cross-entropy of linear(hidden, weight) (soft-capped when softcap > 0) against targets, in row chunks of at most `chunk_rows`, so
/// no (B*T, V) logits tensor is ever allocated whole; the product in `dtype`, the logits and the
/// cross-entropy in fp32. hidden (B,T,C) or (N,C), weight (V,C). Why chunks: tensors above glibc's 32 MiB
/// mmap limit are mapped fresh on every allocation, and the page faults cost more than the arithmetic
/// (measured: a 67 MB add takes 80 ms fresh vs 13 ms into reused memory).
torch::Tensor chunked_next_token_loss(const torch::Tensor& hidden, const torch::Tensor& weight,
                                      const torch::Tensor& targets, int64_t chunk_rows = 256,
                                      c10::ScalarType dtype = torch::kFloat, double softcap = 0.0);

}  // namespace lm::model
