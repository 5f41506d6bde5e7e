// How the fused kernels share a parallel region's work among LibTorch's threads: by each thread's measured
// speed, without changing a bit of the result.
//
// The two vCPUs of a cloud machine rarely run at one speed: on the development machine one thread did its
// half of a product 4-8% slower than the other for a whole run (which one changed from run to run), and
// equal halves made the faster thread wait for the slower one in every region (7% of the product regions'
// time). OpenBLAS computes each row of a product the same way whatever block of rows it sits in, once
// the blocks start at a multiple of its kernel's tile (12 rows for the Haswell sgemm kernels) and are not
// so small that another code path takes them: so the rows can be cut wherever the measured speeds say, and
// the result is the same to the bit for every cut. Runs stay deterministic and resume stays exact.
#pragma once

#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace lm::model::kernels::balance {

/// A piece of a product smaller than this many multiply-adds is never cut off (OpenBLAS may take small
/// products down another path, with other rounding).
constexpr int64_t kMinPieceWork = int64_t{1} << 21;

/// out = alpha a @ b, or out += alpha a @ b when `accumulate`, on the calling thread: how every piece of a
/// product is made (the cuts are checked by this same call).
void multiply(at::Tensor& out, const at::Tensor& a, const at::Tensor& b, bool accumulate, double alpha);

/// The row multiple at which a product through LibTorch's mm/addmm may be cut (pieces of at least
/// kMinPieceWork multiply-adds) and give the same bits as uncut: found once per process (on first use
/// while OpenBLAS runs one thread per call) by cutting products of every operand layout and comparing.
/// 0 when no candidate holds, or while OpenBLAS is not on one thread (or not the BLAS).
int64_t row_unit();

/// The kinds of region whose speeds are measured apart (the loss head's region also runs its softmax).
enum class Region { kProducts, kHead, kCount };

/// How to cut a region over `threads` threads: each thread's share (summing to 1) and the row unit for cut().
struct Plan {
  std::vector<double> shares;
  int64_t unit;
};

/// The threads' measured speeds, per kind of region, and the shares they give: owned by one fused set of
/// operations (fused_ops.h), which hands it to every kernel it calls. The kernels' autograd functions keep
/// it for their backward products (the reason it is reference-counted: a capsule in the autograd context).
class Scheduler : public torch::CustomClassHolder {
 public:
  /// How to cut the next region of this kind: the shares follow the speeds measured in earlier regions when
  /// OpenBLAS runs one thread per call (its own threads would split each piece their own way) and row_unit()
  /// found a unit; else (or before any measurement, or pinned) they are equal, and the cuts fixed.
  Plan plan(Region kind, int64_t threads);

  /// A finished region: what each thread did (work in any unit common to the threads) and in how many seconds.
  void record(Region kind, const std::vector<double>& work, const std::vector<double>& seconds);

  /// For tests: every region's shares fixed to these (normalised); empty: measured again.
  void pin_shares(std::vector<double> shares);

 private:
  std::mutex mu_;
  std::array<std::vector<double>, static_cast<size_t>(Region::kCount)> speed_;  ///< relative, per thread
  std::vector<double> pinned_;
};
using SchedulerPtr = c10::intrusive_ptr<Scheduler>;

/// The plan's rule in words, for the training log: "by measured thread speed, rows cut at multiples of 12" or
/// why the shares stay equal.
std::string describe(int64_t threads);

/// A product's rows laid out for cutting: how many, and the work of one row.
struct Span {
  int64_t rows;
  double row_work;
};
/// A piece of span `span`: rows [lo, lo + n).
struct Piece {
  size_t span;
  int64_t lo, n;
};

/// The spans' rows laid end to end and cut into one run of pieces per thread, in proportion to `shares`.
/// Inside a span every cut is at a multiple of the span's granule (a multiple of `unit` of at least
/// kMinPieceWork multiply-adds) and at least a granule from its end, so no piece is small. Empty pieces are
/// left out.
std::vector<std::vector<Piece>> cut(const std::vector<Span>& spans, const std::vector<double>& shares, int64_t unit);

/// One parallel region over LibTorch's threads: thread t runs body(piece) for each of pieces[t] with grad
/// mode off, timed; then the region is recorded in `scheduler` (work: rows x their span's row_work). Compiled
/// into the caller, which needs -fopenmp (CMakeLists.txt).
template <typename Body>
void run_pieces(Scheduler& scheduler, Region kind, const std::vector<Span>& spans, const std::vector<std::vector<Piece>>& pieces,
                const Body& body) {
  std::vector<double> work(pieces.size(), 0.0), seconds(pieces.size(), 0.0);
  at::parallel_for(0, static_cast<int64_t>(pieces.size()), 1, [&](int64_t begin, int64_t end) {
    const c10::AutoGradMode no_autograd(false);  // thread-local: off on the pool's threads too
    for (auto t = static_cast<size_t>(begin); t < static_cast<size_t>(end); ++t) {
      const auto since = std::chrono::steady_clock::now();
      for (const Piece& k : pieces[t]) {
        body(k);
        work[t] += static_cast<double>(k.n) * spans[k.span].row_work;
      }
      seconds[t] = std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
    }
  });
  scheduler.record(kind, work, seconds);
}

}  // namespace lm::model::kernels::balance
