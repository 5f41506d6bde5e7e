#include "train/contrastive.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

#include "data/batcher.h"
#include "dist/group.h"
#include "util/errors.h"
#include "util/hash.h"
#include "util/text.h"

namespace lm::train {
namespace fs = std::filesystem;
namespace F = torch::nn::functional;

namespace {

// The implied line start, then the pieces, cut to the context; empty when the text has no piece.
std::vector<int32_t> encode_line(const tokenizer::Tokenizer& tok, const std::string& text, int64_t max_seq_len) {
  std::vector<int32_t> ids{tok.eos_id()};
  const auto pieces = tok.encode(text);
  if (pieces.empty()) return {};
  ids.insert(ids.end(), pieces.begin(), pieces.end());
  if (static_cast<int64_t>(ids.size()) > max_seq_len) ids.resize(static_cast<size_t>(max_seq_len));
  return ids;
}

// The lines of a text, a trailing \r dropped from each.
std::vector<std::string> text_lines(const std::string& text) {
  std::vector<std::string> lines = util::split(text, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();  // the last newline
  for (auto& l : lines) {
    if (!l.empty() && l.back() == '\r') l.pop_back();
  }
  return lines;
}

bool blank(const std::string& s) { return s.find_first_not_of(" \t") == std::string::npos; }

// 0..n-1 in a Fisher-Yates order drawn from `state` with the batcher's mixer (data::splitmix64).
std::vector<int64_t> shuffled(size_t n, uint64_t state) {
  std::vector<int64_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = static_cast<int64_t>(i);
  for (size_t i = n; i-- > 1;) {
    state = data::splitmix64(state);
    std::swap(order[i], order[state % (i + 1)]);
  }
  return order;
}

}  // namespace

std::vector<LinePair> read_pairs(const fs::path& tsv, const tokenizer::Tokenizer& tok, int64_t max_seq_len) {
  const std::string text = tokenizer::read_corpus(tsv, "contrastive pairs");  // UTF-8, NUL: named by line
  const auto lines = text_lines(text);
  std::vector<LinePair> out;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string where = "[finetune] pairs '" + tsv.string() + "' line " + std::to_string(i + 1);
    const auto tabs = std::count(lines[i].begin(), lines[i].end(), '\t');
    if (tabs != 1) {
      throw DataError(where + ": expected `anchor<TAB>positive` (one tab), got " + std::to_string(tabs) +
                      " tabs. Hint: one pair a line, the two texts separated by a tab.");
    }
    const size_t tab = lines[i].find('\t');
    const std::string parts[2] = {lines[i].substr(0, tab), lines[i].substr(tab + 1)};
    for (size_t side = 0; side < 2; ++side) {
      if (blank(parts[side])) {
        throw DataError(where + ": expected text on both sides of the tab, got an empty " +
                        (side == 0 ? "anchor" : "positive") + ". Hint: remove the line or fill it in.");
      }
    }
    LinePair p{encode_line(tok, parts[0], max_seq_len), encode_line(tok, parts[1], max_seq_len)};
    if (p.anchor.empty() || p.positive.empty()) {
      throw DataError(where + ": expected text that encodes to pieces, got only characters the tokenizer drops. "
                              "Hint: remove the line.");
    }
    out.push_back(std::move(p));
  }
  if (out.empty()) throw DataError("[finetune] pairs '" + tsv.string() + "': expected at least one pair, got none");
  return out;
}

std::vector<LinePair> next_line_pairs(const tokenizer::CorpusFiles& files, const tokenizer::Tokenizer& tok,
                                      int64_t max_seq_len) {
  std::vector<LinePair> out;
  for (const auto& file : files) {
    const auto lines = text_lines(tokenizer::read_corpus(file, "next_line positives"));
    std::vector<int32_t> prev;  // an anchor waiting for its positive; empty after a pair, a blank line, a file's start
    for (const auto& line : lines) {
      std::vector<int32_t> ids = blank(line) ? std::vector<int32_t>() : encode_line(tok, line, max_seq_len);
      if (!prev.empty() && !ids.empty()) {
        out.push_back({std::move(prev), std::move(ids)});
        prev.clear();  // the next pair starts after this one: no line is both an anchor and a positive
      } else {
        prev = std::move(ids);
      }
    }
  }
  return out;
}

torch::Tensor info_nce(const torch::Tensor& a, const torch::Tensor& b, double temperature) {
  const auto dtype = a.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
  const auto an = F::normalize(a.to(dtype), F::NormalizeFuncOptions().dim(1));
  const auto bn = F::normalize(b.to(dtype), F::NormalizeFuncOptions().dim(1));
  const auto logits = an.matmul(bn.t()) / temperature;  // (B,B): row i scores anchor i against every positive
  const auto labels = torch::arange(a.size(0), torch::TensorOptions().dtype(torch::kInt64).device(a.device()));
  return (F::cross_entropy(logits, labels) + F::cross_entropy(logits.t(), labels)) / 2.0;
}

Retrieval retrieval_scores(const torch::Tensor& queries, const torch::Tensor& documents) {
  const auto q = F::normalize(queries.to(torch::kCPU, torch::kDouble), F::NormalizeFuncOptions().dim(1));
  const auto d = F::normalize(documents.to(torch::kCPU, torch::kDouble), F::NormalizeFuncOptions().dim(1));
  std::vector<torch::Tensor> ranks;  // the right one itself counts as 1; queries 1024 at a time (N x N is large)
  for (int64_t from = 0; from < q.size(0); from += 1024) {
    const int64_t n = std::min<int64_t>(1024, q.size(0) - from);
    const auto s = q.narrow(0, from, n).matmul(d.t());
    const auto right = s.gather(1, torch::arange(from, from + n, torch::kInt64).unsqueeze(1));  // the same products
    ranks.push_back((s >= right).sum(1).to(torch::kDouble));
  }
  const auto rank = torch::cat(ranks);
  Retrieval r;
  r.n = q.size(0);
  r.top1 = (rank <= 1).to(torch::kDouble).mean().item<double>();
  r.top10 = (rank <= 10).to(torch::kDouble).mean().item<double>();
  r.mrr = (1.0 / rank).mean().item<double>();
  return r;
}

Retrieval retrieval_chance(int64_t n) {
  Retrieval r;
  r.n = n;
  r.top1 = 1.0 / static_cast<double>(n);
  r.top10 = static_cast<double>(std::min<int64_t>(10, n)) / static_cast<double>(n);
  for (int64_t i = 1; i <= n; ++i) r.mrr += 1.0 / static_cast<double>(i);
  r.mrr /= static_cast<double>(n);
  return r;
}

torch::Tensor pooled_lines(model::GptImpl& m, const std::vector<const std::vector<int32_t>*>& lines, model::Pool pool,
                           int32_t pad, torch::Tensor* lm_loss) {
  const int64_t n = static_cast<int64_t>(lines.size());
  int64_t longest = 0;
  for (const auto* l : lines) longest = std::max(longest, static_cast<int64_t>(l->size()));
  auto idx = torch::full({n, longest}, pad, torch::kInt64);
  auto targets = torch::full({n, longest}, -100, torch::kInt64);  // ignored where not a next piece or line end
  std::vector<int64_t> lengths(static_cast<size_t>(n));
  auto x = idx.accessor<int64_t, 2>();
  auto y = targets.accessor<int64_t, 2>();
  for (int64_t i = 0; i < n; ++i) {
    const auto& ids = *lines[static_cast<size_t>(i)];
    const int64_t len = static_cast<int64_t>(ids.size());
    lengths[static_cast<size_t>(i)] = len - 1;
    for (int64_t p = 0; p < len; ++p) x[i][p] = ids[static_cast<size_t>(p)];
    for (int64_t p = 0; p + 1 < len; ++p) y[i][p] = ids[static_cast<size_t>(p + 1)];
    // the line's end; a line that fills the context may have been cut, and gets none
    if (len < m.config().max_seq_len) y[i][len - 1] = pad;
  }
  const auto h = m.forward_hidden(idx.to(m.device()));
  if (lm_loss) {  // the model's own loss (no (N,V) logits held whole) over the positions that have a target
    const auto flat = targets.reshape(-1);
    const auto at = (flat != -100).nonzero().reshape(-1).to(m.device());
    *lm_loss = m.ops()->next_token_loss(h.reshape({-1, h.size(2)}).index_select(0, at), m.output_weight(),
                                        flat.to(m.device()).index_select(0, at), m.config().logit_softcap);
  }
  return model::pool_states(h, lengths, pool);
}

std::pair<torch::Tensor, torch::Tensor> embed_pairs(model::GptImpl& m, const std::vector<LinePair>& pairs,
                                                    model::Pool pool, int32_t pad, int64_t batch) {
  const bool was_training = m.is_training();
  m.eval();
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> a, b;
  for (size_t from = 0; from < pairs.size(); from += static_cast<size_t>(batch)) {
    std::vector<const std::vector<int32_t>*> anchors, positives;
    for (size_t i = from; i < std::min(pairs.size(), from + static_cast<size_t>(batch)); ++i) {
      anchors.push_back(&pairs[i].anchor);
      positives.push_back(&pairs[i].positive);
    }
    a.push_back(pooled_lines(m, anchors, pool, pad).cpu());
    b.push_back(pooled_lines(m, positives, pool, pad).cpu());
  }
  m.train(was_training);
  return {torch::cat(a), torch::cat(b)};
}

void check_pairs_files(const fs::path& pairs, const fs::path& val_pairs) {
  for (const auto& [key, file] : {std::pair{"pairs", pairs}, std::pair{"val_pairs", val_pairs}}) {
    if (!fs::is_regular_file(file)) {
      throw DataError(std::string("[finetune] ") + key + ": expected a TSV file of `anchor<TAB>positive` lines, got '" +
                      file.string() + "' (no such file)");
    }
  }
}

std::string pairs_identity(const ContrastiveSpec& spec) {
  if (spec.pairs.empty()) return "next_line";
  check_pairs_files(spec.pairs, spec.val_pairs);
  return util::sha256_hex(util::sha256_file(spec.pairs) + util::sha256_file(spec.val_pairs));
}

Contrastive::Contrastive(const ContrastiveSpec& spec, const tokenizer::Tokenizer& tok, int64_t max_seq_len,
                         int64_t batch, uint64_t seed, int rank, int world)
    : spec_(spec), B_(batch), seed_(seed), rank_(static_cast<uint64_t>(rank)), world_(static_cast<uint64_t>(world)),
      pad_(tok.eos_id()) {
  if (spec.pairs.empty()) {
    train_ = next_line_pairs(spec.train_files, tok, max_seq_len);
    val_ = next_line_pairs(spec.val_files, tok, max_seq_len);
  } else {
    train_ = read_pairs(spec.pairs, tok, max_seq_len);
    val_ = read_pairs(spec.val_pairs, tok, max_seq_len);
  }
  const std::string source = spec.pairs.empty() ? "next_line pairs of data.train" : "pairs of " + spec.pairs.string();
  if (static_cast<int64_t>(train_.size()) < B_) {
    throw DataError("[finetune] contrastive: expected at least train.batch_size=" + std::to_string(B_) + " " + source +
                    ", got " + std::to_string(train_.size()) + ". Hint: lower train.batch_size or add pairs.");
  }
  if (val_.size() < 2) {
    throw DataError("[finetune] contrastive: expected at least 2 held-out pairs (" +
                    std::string(spec.pairs.empty() ? "next_line pairs of data.val" : spec.val_pairs.string()) +
                    "), got " + std::to_string(val_.size()));
  }
}

std::string Contrastive::describe() const {
  return fmt::format("contrastive: {} training pairs ({}), {} held out; in-batch InfoNCE over {} pooling at "
                     "temperature {}, {} pairs a micro-batch (each line's negatives: the other {} positives of its "
                     "micro-batch{}){}", train_.size(), spec_.pairs.empty() ? "next_line" : spec_.pairs.string(),
                     val_.size(), model::to_string(spec_.pool), spec_.temperature, B_, B_ - 1,
                     world_ > 1 ? ", on its own process" : "",
                     spec_.lm_weight > 0 ? fmt::format(", plus {} x the next-token loss of the same lines", spec_.lm_weight)
                                         : std::string());
}

std::string Contrastive::loss_unit() const {
  return spec_.lm_weight > 0 ? "InfoNCE + lm_weight x next-token nats" : "InfoNCE";
}

const std::vector<int64_t>& Contrastive::order(uint64_t epoch) {
  if (epoch != epoch_) {  // drawn from (seed, epoch)
    order_ = shuffled(train_.size(), data::splitmix64(seed_ ^ 0x636f6e7472617374ULL) + epoch);
    epoch_ = epoch;
  }
  return order_;
}

double Contrastive::micro_loss(model::GptImpl& m, const std::vector<const LinePair*>& chunk, bool backward,
                               double scale) const {
  std::vector<const std::vector<int32_t>*> lines;  // anchors, then positives: one forward pass
  for (const auto* p : chunk) lines.push_back(&p->anchor);
  for (const auto* p : chunk) lines.push_back(&p->positive);
  torch::Tensor lm;
  const auto v = pooled_lines(m, lines, spec_.pool, pad_, spec_.lm_weight > 0 ? &lm : nullptr);
  const int64_t n = static_cast<int64_t>(chunk.size());
  auto loss = info_nce(v.narrow(0, 0, n), v.narrow(0, n, n), spec_.temperature);
  if (spec_.lm_weight > 0) loss = loss + spec_.lm_weight * lm;
  // The fused lookup's gradient is sparse, made to be added to the head's dense one (model/fused): without
  // the next-token loss, a zero term through the output weight gives the table its dense gradient, as AdamW
  // and the ranks' all-reduce expect.
  if (spec_.lm_weight == 0 && backward && m.output_weight().requires_grad()) loss = loss + 0.0 * m.output_weight().sum();
  if (backward) (loss * scale).backward();
  return loss.item<double>();
}

double Contrastive::accumulate(model::GptImpl& m, int64_t accum, const std::function<void()>& before_last) {
  m.zero_grad(/*set_to_none=*/true);
  const uint64_t per_epoch = train_.size() / static_cast<uint64_t>(B_);
  double mean = 0.0;
  for (int64_t micro = 0; micro < accum; ++micro) {
    const uint64_t chunk = cursor_ * world_ + rank_;
    const auto& o = order(chunk / per_epoch);
    const uint64_t first = (chunk % per_epoch) * static_cast<uint64_t>(B_);
    std::vector<const LinePair*> pairs;
    for (int64_t i = 0; i < B_; ++i) pairs.push_back(&train_[static_cast<size_t>(o[first + static_cast<uint64_t>(i)])]);
    ++cursor_;
    if (micro + 1 == accum && before_last) before_last();
    mean += micro_loss(m, pairs, /*backward=*/true, 1.0 / static_cast<double>(accum)) / static_cast<double>(accum);
  }
  return mean;
}

double Contrastive::val_loss(model::GptImpl& m, int64_t max_chunks, dist::Group* group) const {
  const bool was_training = m.is_training();
  m.eval();
  torch::NoGradGuard no_grad;
  // one fixed shuffle of the held-out pairs, so that a chunk's negatives are as random as a training batch's
  // (file order would give each anchor its neighbours, a harder task than the one trained)
  const std::vector<int64_t> order = shuffled(val_.size(), data::splitmix64(0x76616c7061697273ULL));
  // whole chunks of B (InfoNCE's scale depends on the chunk's size), or the one smaller chunk there is;
  // rank r of W takes chunks r, r+W, ... and the ranks add up their sums
  int64_t total = std::max<int64_t>(1, static_cast<int64_t>(val_.size()) / B_);
  if (max_chunks > 0) total = std::min(total, max_chunks);
  const int rank = group ? group->rank() : 0, world = group ? group->size() : 1;
  double sum = 0.0;
  for (int64_t c = rank; c < total; c += world) {
    std::vector<const LinePair*> pairs;
    const size_t from = static_cast<size_t>(c * B_);
    for (size_t i = from; i < std::min(val_.size(), from + static_cast<size_t>(B_)); ++i) pairs.push_back(&val_[static_cast<size_t>(order[i])]);
    sum += micro_loss(m, pairs, /*backward=*/false, 1.0);
  }
  m.train(was_training);
  if (group) {
    auto t = torch::tensor({sum}, torch::kFloat64);
    group->allreduce_sum(t);
    sum = t[0].item<double>();
  }
  return sum / static_cast<double>(total);
}

}  // namespace lm::train
