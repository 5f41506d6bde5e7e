// GptImpl::decode_one: the incremental-decoding step for a single token. At d_model 128 a LibTorch op on
// a 128-float vector costs microseconds of dispatch for nanoseconds of arithmetic, so only the matrix-
// vector products stay tensor ops (OpenBLAS sgemv); LayerNorm, attention over the cache, GELU and the
// residual adds are loops over raw floats. Same math as forward_cached (tested against full recompute).
#include <cmath>
#include <cstdint>
#include <vector>

#include "model/gpt.h"

namespace lm::model {
namespace {

// out = LayerNorm(x) with the layer's weight and bias (eps 1e-5, LibTorch's default).
void layer_norm(const float* x, const torch::nn::LayerNorm& ln, float* out, int64_t C) {
  double mean = 0.0, var = 0.0;
  for (int64_t i = 0; i < C; ++i) mean += x[i];
  mean /= static_cast<double>(C);
  for (int64_t i = 0; i < C; ++i) var += (x[i] - mean) * (x[i] - mean);
  const double inv = 1.0 / std::sqrt(var / static_cast<double>(C) + ln->options.eps());
  const float* w = ln->weight.data_ptr<float>();
  const float* b = ln->bias.data_ptr<float>();
  for (int64_t i = 0; i < C; ++i) out[i] = static_cast<float>((x[i] - mean) * inv) * w[i] + b[i];
}

torch::Tensor addmv(const torch::nn::Linear& l, const torch::Tensor& x) { return torch::addmv(l->bias, l->weight, x); }

void add_into(float* x, const torch::Tensor& t, int64_t C) {
  const float* p = t.data_ptr<float>();
  for (int64_t i = 0; i < C; ++i) x[i] += p[i];
}

}  // namespace

torch::Tensor GptImpl::decode_one(int64_t token, KvCache& cache) {
  const int64_t C = cfg_.d_model, H = cfg_.n_heads, D = C / H, pos = cache.length();
  torch::NoGradGuard no_grad;
  // Nothing cached yet, or weights a CPU loop cannot read (on a GPU, or bf16 products): the tensor path.
  if (pos == 0 || !device().is_cpu() || compute_dtype_ != torch::kFloat) {
    return forward_cached(torch::full({1, 1}, token, torch::kInt64), cache)[0];  // (V)
  }
  auto x = tok_emb->weight[token].clone();  // (C) the residual stream
  if (cfg_.embedding_scale == EmbeddingScale::kSqrtD) x.mul_(std::sqrt(static_cast<double>(C)));
  x.add_(pos_emb->forward(1, pos)[0]);
  float* xp = x.data_ptr<float>();
  auto h = torch::empty({C});      // LayerNorm output
  auto y = torch::empty({C});      // attention output
  float* hp = h.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  std::vector<float> scores(static_cast<size_t>(pos + 1));
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  for (size_t i = 0; i < blocks->size(); ++i) {
    auto& blk = *blocks[i]->as<BlockImpl>();
    KvLayer& kv = cache.layers[i];
    layer_norm(xp, blk.ln1, hp, C);
    auto qkv = addmv(blk.attn->qkv, h);  // (3C): q | k | v, head-major inside each
    const float* q = qkv.data_ptr<float>();
    kv.append_one(q + C, q + 2 * C);  // this token's key and value, at position pos
    for (int64_t hd = 0; hd < H; ++hd) {  // softmax(q k^T / sqrt(D)) v over positions 0..pos
      const float* qh = q + hd * D;
      const float* kb = kv.key_rows(hd);  // (pos+1, D)
      const float* vb = kv.value_rows(hd);
      float top = -INFINITY;
      for (int64_t s = 0; s <= pos; ++s) {
        const float* k = kb + s * D;
        float dot = 0.0f;
        for (int64_t d = 0; d < D; ++d) dot += qh[d] * k[d];
        scores[s] = dot * scale;
        top = std::max(top, scores[s]);
      }
      float total = 0.0f;
      for (int64_t s = 0; s <= pos; ++s) total += (scores[s] = std::exp(scores[s] - top));
      float* out = yp + hd * D;
      for (int64_t d = 0; d < D; ++d) out[d] = 0.0f;
      for (int64_t s = 0; s <= pos; ++s) {
        const float a = scores[s] / total;
        const float* v = vb + s * D;
        for (int64_t d = 0; d < D; ++d) out[d] += a * v[d];
      }
    }
    add_into(xp, addmv(blk.attn->proj, y), C);
    layer_norm(xp, blk.ln2, hp, C);
    auto f = addmv(blk.mlp->fc, h);  // (hidden)
    float* fp = f.data_ptr<float>();
    for (int64_t j = 0; j < f.size(0); ++j) fp[j] = 0.5f * fp[j] * (1.0f + std::erf(fp[j] * static_cast<float>(M_SQRT1_2)));
    add_into(xp, addmv(blk.mlp->proj, f), C);
  }
  layer_norm(xp, ln_f, hp, C);
  return torch::mv(output_weight(), h);  // (V)
}

}  // namespace lm::model
