#include "model/fused/balance.h"

#include "util/threads.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <mutex>
#include <numeric>

namespace lm::model::kernels::balance {

namespace {

// How fast a thread's measured speed moves its share: each region counts this much (a time constant of
// ~20 regions, under one config-S step). One region's speeds scatter by ~5% (vCPU noise) around a level
// that holds for minutes, so a slow average finds the level without chasing the noise.
constexpr double kRate = 0.05;
// One region's relative speed is clamped to this range before it counts (a thread preempted for a few
// milliseconds would otherwise pull its share far down).
constexpr double kMinSpeed = 0.67, kMaxSpeed = 1.5;

// Row multiples tried, smallest first: OpenBLAS's sgemm kernels are 4 to 32 rows tall.
constexpr std::array<int64_t, 8> kCandidateUnits{4, 8, 12, 16, 24, 32, 48, 64};

// Rows a piece of a span needs: a multiple of `unit`, at least kMinPieceWork multiply-adds.
int64_t granule(const Span& s, int64_t unit) {
  const auto least = static_cast<int64_t>(std::ceil(static_cast<double>(kMinPieceWork) / std::max(s.row_work, 1.0)));
  return (std::max(least, unit) + unit - 1) / unit * unit;
}

// Fills t with a fixed pseudo-random sequence (not LibTorch's generator, whose state training owns).
void fill(at::Tensor& t, uint32_t seed) {
  float* p = t.data_ptr<float>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    seed = seed * 1664525u + 1013904223u;
    p[i] = static_cast<float>(seed >> 8) / static_cast<float>(1u << 24) - 0.5f;
  }
}

// The smallest odd multiple of `unit` of at least `least` rows: a cut there is at no multiple of 2 x unit.
int64_t odd_multiple(int64_t unit, int64_t least) {
  int64_t k = (least + unit - 1) / unit;
  if (k % 2 == 0) ++k;
  return k * unit;
}

// True when cutting products of every layout and mode (mm, scaled, accumulating) at odd multiples of
// `unit` gives the same bits as the uncut products: a K that fits one of OpenBLAS's K blocks and one that
// does not, a ragged last piece.
bool cuts_keep_bits(int64_t unit) {
  for (const auto& [K, N] : {std::pair<int64_t, int64_t>{128, 200}, {1024, 24}}) {
    const int64_t o = odd_multiple(unit, granule({1, static_cast<double>(K * N)}, unit));
    const int64_t M = 4 * o + 5, cuts[] = {0, o, 3 * o, M};
    for (int layout = 0; layout < 4; ++layout) {
      at::Tensor a = layout & 1 ? at::empty({K, M}).t() : at::empty({M, K});
      at::Tensor b = layout & 2 ? at::empty({N, K}).t() : at::empty({K, N});
      fill(a, 1u + layout), fill(b, 7u + layout);
      for (int mode = 0; mode < 3; ++mode) {
        const bool accumulate = mode == 2;
        const double alpha = mode == 0 ? 1.0 : 0.37;
        at::Tensor whole = at::empty({M, N}), pieces = at::empty({M, N});
        fill(whole, 99u), fill(pieces, 99u);
        multiply(whole, a, b, accumulate, alpha);
        for (int i = 0; i < 3; ++i) {
          at::Tensor out = pieces.narrow(0, cuts[i], cuts[i + 1] - cuts[i]);
          multiply(out, a.narrow(0, cuts[i], cuts[i + 1] - cuts[i]), b, accumulate, alpha);
        }
        if (!at::equal(whole, pieces)) return false;
      }
    }
  }
  return true;
}

int64_t find_row_unit() {
  const c10::AutoGradMode no_autograd(false);
  for (const int64_t unit : kCandidateUnits) {
    if (cuts_keep_bits(unit)) return unit;
  }
  return 0;
}

}  // namespace

void multiply(at::Tensor& out, const at::Tensor& a, const at::Tensor& b, bool accumulate, double alpha) {
  // A product into fresh memory is 0 + alpha a b, the same floats as beta 0. Not beta 0 itself: OpenBLAS
  // then clears `out` with glibc's memset (rep stosb here), which a profile of a kjv-modern step puts a
  // little above LibTorch's own fill of the same rows (memset 1.9% of its samples; after, memset 0.5% and
  // the fill about 0.9%).
  if (!accumulate) out.zero_();
  out.addmm_(a, b, /*beta=*/1, alpha);
}

int64_t row_unit() {
  if (util::blas_threads() != 1) return 0;  // its own threads would cut each product their own way
  static const int64_t unit = find_row_unit();
  return unit;
}

namespace {

// Whether the shares may follow the measured speeds now, and if not, why.
const char* equal_shares_reason(int64_t threads) {
  if (threads < 2) return "one thread";
  if (util::blas_threads() != 1) return "equal shares: OpenBLAS is not on one thread per call";
  if (row_unit() == 0) return "equal shares: no row cut keeps this BLAS's bits";
  return nullptr;
}

}  // namespace

Plan Scheduler::plan(Region kind, int64_t threads) {
  Plan out{std::vector<double>(static_cast<size_t>(threads), 1.0 / static_cast<double>(threads)), 8};
  if (equal_shares_reason(threads) != nullptr) return out;
  out.unit = row_unit();
  const std::lock_guard<std::mutex> lock(mu_);
  const std::vector<double>& from = pinned_.empty() ? speed_[static_cast<size_t>(kind)] : pinned_;
  if (from.size() != out.shares.size()) return out;
  const double total = std::accumulate(from.begin(), from.end(), 0.0);
  for (size_t t = 0; t < out.shares.size(); ++t) out.shares[t] = from[t] / total;
  return out;
}

std::string describe(int64_t threads) {
  const char* reason = equal_shares_reason(threads);
  return reason != nullptr ? reason : "by measured thread speed, rows cut at multiples of " + std::to_string(row_unit());
}

void Scheduler::record(Region kind, const std::vector<double>& work, const std::vector<double>& seconds) {
  const size_t threads = work.size();
  std::vector<double> speed(threads);
  for (size_t t = 0; t < threads; ++t) {
    if (work[t] <= 0 || seconds[t] <= 0) return;  // a thread sat out: nothing to compare
    speed[t] = work[t] / seconds[t];
  }
  const double mean = std::accumulate(speed.begin(), speed.end(), 0.0) / static_cast<double>(threads);
  const std::lock_guard<std::mutex> lock(mu_);
  std::vector<double>& level = speed_[static_cast<size_t>(kind)];
  if (level.size() != threads) level.assign(threads, 1.0);
  for (size_t t = 0; t < threads; ++t) level[t] += kRate * (std::clamp(speed[t] / mean, kMinSpeed, kMaxSpeed) - level[t]);
}

void Scheduler::pin_shares(std::vector<double> shares) {
  const std::lock_guard<std::mutex> lock(mu_);
  pinned_ = std::move(shares);
}

std::vector<std::vector<Piece>> cut(const std::vector<Span>& spans, const std::vector<double>& shares, int64_t unit) {
  unit = std::max<int64_t>(unit, 1);
  std::vector<std::vector<Piece>> out(shares.size());
  if (spans.empty() || shares.empty()) return out;
  std::vector<double> start(spans.size() + 1, 0.0);  // where each span starts, in work
  for (size_t i = 0; i < spans.size(); ++i) start[i + 1] = start[i] + static_cast<double>(spans[i].rows) * spans[i].row_work;
  // Each thread's last position, as (span, row), rounded onto the granule grid of the span it falls in.
  std::vector<std::pair<size_t, int64_t>> ends;
  double acc = 0;
  for (size_t t = 0; t + 1 < shares.size(); ++t) {
    acc += shares[t];
    const double target = acc * start.back();
    size_t i = 0;
    while (i + 1 < spans.size() && start[i + 1] <= target) ++i;
    const Span& s = spans[i];
    const int64_t g = granule(s, unit), last = (s.rows - g) / g * g;  // last: the latest cut leaving g rows
    const double x = (target - start[i]) / std::max(s.row_work, 1e-30);
    int64_t row = last < g ? 0 : std::clamp<int64_t>(std::llround(x / static_cast<double>(g)) * g, 0, last);
    if (x - static_cast<double>(row) > static_cast<double>(s.rows) - x) row = s.rows;  // the end is nearer
    ends.emplace_back(i, row);
    if (ends.size() > 1 && ends.back() < ends[ends.size() - 2]) ends.back() = ends[ends.size() - 2];
  }
  ends.emplace_back(spans.size() - 1, spans.back().rows);
  std::pair<size_t, int64_t> from{0, 0};
  for (size_t t = 0; t < shares.size(); ++t) {
    const auto to = ends[t];
    for (size_t i = from.first; i <= to.first; ++i) {
      const int64_t lo = i == from.first ? from.second : 0, hi = i == to.first ? to.second : spans[i].rows;
      if (hi > lo) out[t].push_back({i, lo, hi - lo});
    }
    from = to;
  }
  return out;
}

}  // namespace lm::model::kernels::balance
