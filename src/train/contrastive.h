// finetune.objective contrastive: a fine-tune that turns a language model into a sentence encoder. Each step
// pools B anchor lines and their B positives into vectors (model/pool.h, as `lmtrain embed` does), and
// minimises the symmetric in-batch InfoNCE loss: every other positive of the micro-batch is an anchor's
// negative. Pairs come from a TSV file or from adjacent lines of the same file (next_line); held-out pairs
// give the validation loss and the retrieval scores (top-1, top-10, MRR) of the report.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "model/gpt.h"
#include "model/pool.h"
#include "tokenizer/corpus_text.h"
#include "tokenizer/tokenizer.h"

namespace lm::dist {
class Group;
}

namespace lm::train {

/// Two lines as the model reads them: the implied line start, then the pieces, cut to the context.
struct LinePair {
  std::vector<int32_t> anchor, positive;
};

/// The pairs of a TSV file, `anchor<TAB>positive` a line (the last newline optional). Throws DataError
/// (exit 3) naming the file and line for a line without exactly one tab, an empty side, invalid UTF-8 or a
/// side that encodes to no piece; and for a file with no pair.
std::vector<LinePair> read_pairs(const std::filesystem::path& tsv, const tokenizer::Tokenizer& tok, int64_t max_seq_len);

/// next_line positives: the non-blank lines of a file taken two at a time, each with the line after it (lines
/// 1-2, 3-4, ...), so that no line is both an anchor and a positive (an anchor would meet itself among the
/// positives). A blank line ends a run (a paragraph) and the pairing starts again after it; pairs never cross
/// files, and a run's odd last line is left out.
std::vector<LinePair> next_line_pairs(const tokenizer::CorpusFiles& files, const tokenizer::Tokenizer& tok,
                                      int64_t max_seq_len);

/// Symmetric InfoNCE of B anchor vectors `a` and their positives `b` (B,C): with s = cos(a_i, b_j) / t, the
/// mean of cross-entropy(s_i., i) and cross-entropy(s_.j, j) over i, j. () in a's dtype (float32 unless a
/// is float64).
torch::Tensor info_nce(const torch::Tensor& a, const torch::Tensor& b, double temperature);

/// Retrieval of documents (N,C) by queries (N,C), query i's right document being document i, ranked by
/// cosine; ties count against the query (scripts/retrieval_score.py computes the same). Queries are scored
/// 1,024 at a time.
struct Retrieval {
  int64_t n = 0;
  double top1 = 0, top10 = 0, mrr = 0;
};
Retrieval retrieval_scores(const torch::Tensor& queries, const torch::Tensor& documents);
/// What a random order scores: 1/N, min(10,N)/N, H_N/N.
Retrieval retrieval_chance(int64_t n);

/// The pooled vectors of `lines` (B,C) through the model as it is (train or eval mode, with or without
/// gradients). Lines are padded at the end with `pad` (attention is causal: padding never reaches a piece).
/// When `lm_loss` is given it receives the mean next-token loss of the same lines (each line's pieces and its
/// end, padding left out).
torch::Tensor pooled_lines(model::GptImpl& m, const std::vector<const std::vector<int32_t>*>& lines, model::Pool pool,
                           int32_t pad, torch::Tensor* lm_loss = nullptr);

/// Vectors of every anchor and positive (eval mode, no gradients), `batch` lines a forward pass: (N,C) each.
std::pair<torch::Tensor, torch::Tensor> embed_pairs(model::GptImpl& m, const std::vector<LinePair>& pairs,
                                                    model::Pool pool, int32_t pad, int64_t batch);

struct ContrastiveSpec {
  model::Pool pool = model::Pool::kMean;
  double temperature = 0.05;
  double lm_weight = 0.0;
  std::filesystem::path pairs, val_pairs;  ///< TSV files, or empty for next_line
  tokenizer::CorpusFiles train_files, val_files;  ///< next_line: the run's data.train / data.val files
};

/// Throws DataError (exit 3) naming finetune.pairs or val_pairs when either is not a regular file.
void check_pairs_files(const std::filesystem::path& pairs, const std::filesystem::path& val_pairs);

/// What a checkpoint records of the pairs (checkpoint::DataIdentity::pairs), which a resume must match:
/// "next_line", or the SHA-256 of the pairs and val_pairs files' SHA-256s.
std::string pairs_identity(const ContrastiveSpec& spec);

/// The contrastive objective of one process of a run. Micro-batch k of B pairs is chunk k of a seeded
/// shuffle of the training pairs (a fresh shuffle each epoch; a last partial chunk is left out), so the data
/// cursor is one integer and resume is exact. Of W processes, rank r takes chunk k*W + r: W processes x B
/// pairs train on the pairs of one process with grad_accum W, and each rank's negatives are its own B.
class Contrastive {
 public:
  /// Reads and encodes the pairs. Throws DataError for bad pairs or fewer than `batch` of them.
  Contrastive(const ContrastiveSpec& spec, const tokenizer::Tokenizer& tok, int64_t max_seq_len, int64_t batch,
              uint64_t seed, int rank, int world);
  /// Forward and backward over `accum` micro-batches from the cursor (loss / accum each; `before_last` is
  /// called before the last backward); returns their mean loss. Zeroes the gradients first.
  double accumulate(model::GptImpl& m, int64_t accum, const std::function<void()>& before_last);
  uint64_t cursor() const { return cursor_; }
  void set_cursor(uint64_t k) { cursor_ = k; }
  /// Mean InfoNCE (plus lm_weight x next-token loss) of the held-out pairs in whole chunks of B of one fixed
  /// shuffle (or all of them as one chunk when there are fewer than B), up to `max_chunks` (0 = all). Eval
  /// mode, no gradients. With a `group`, each rank evaluates its share and all return the same total.
  double val_loss(model::GptImpl& m, int64_t max_chunks, dist::Group* group = nullptr) const;
  const std::vector<LinePair>& train_pairs() const { return train_; }
  const std::vector<LinePair>& val_pairs() const { return val_; }
  std::string describe() const;
  /// What its losses measure (metrics.jsonl's loss_unit, the validation log line): "InfoNCE", or
  /// "InfoNCE + lm_weight x next-token nats" with lm_weight > 0.
  std::string loss_unit() const;

 private:
  double micro_loss(model::GptImpl& m, const std::vector<const LinePair*>& chunk, bool backward, double scale) const;
  const std::vector<int64_t>& order(uint64_t epoch);

  ContrastiveSpec spec_;
  std::vector<LinePair> train_, val_;
  int64_t B_;
  uint64_t seed_, rank_, world_;
  int32_t pad_;
  uint64_t cursor_ = 0;
  uint64_t epoch_ = UINT64_MAX;
  std::vector<int64_t> order_;
};

}  // namespace lm::train
