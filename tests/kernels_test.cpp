// The fused CPU kernels (model/kernels.h) against LibTorch's own ops: same values and gradients, at odd
// sizes that do not divide into the thread blocks, with and without gradients wanted; and the whole
// model's loss and gradients in both modes.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <array>
#include <map>

#include "model/attention.h"
#include "model/fused/balance.h"
#include "model/fused/bf16_products.h"
#include "model/fused/kernels.h"
#include "model/fused/simd.h"
#include "model/gpt.h"
#include "model/make_ops.h"
#include "test_util.h"
#include "util/errors.h"
#include "util/threads.h"

namespace lm::test {

namespace kn = model::kernels;

namespace {

// Runs the test body on 2 LibTorch threads and one OpenBLAS thread per call (the trainer's setting for the
// fused set), and restores both thread counts.
class Kernels : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!kn::simd_loops()) GTEST_SKIP() << "this CPU has no AVX2 + FMA: the fused set is refused here";
    threads_ = torch::get_num_threads();
    blas_threads_ = util::blas_threads();
    util::set_compute_threads(2, 1);
    torch::manual_seed(7);
  }
  void TearDown() override {
    kn::cap_simd_lanes(16);
    util::set_compute_threads(threads_, std::max(1, blas_threads_));
  }
  int threads_ = 1, blas_threads_ = 1;
  kn::SchedulerPtr scheduler_ = c10::make_intrusive<kn::Scheduler>();  ///< as a fused set of operations owns one
};

// The vector widths simd.h's loops can run here: 8 (AVX2), and 16 where the CPU has AVX-512.
std::vector<int> widths() {
  kn::cap_simd_lanes(16);
  std::vector<int> out;
  for (const int lanes : {8, 16}) {
    if (kn::simd_lanes() >= lanes) out.push_back(lanes);
  }
  return out;
}

void expect_close(const torch::Tensor& a, const torch::Tensor& b, double tol, const std::string& what) {
  ASSERT_EQ(a.sizes(), b.sizes()) << what;
  const double diff = (a - b).abs().max().item<double>(), scale = std::max(1.0, b.abs().max().item<double>());
  EXPECT_LE(diff, tol * scale) << what << ": max |difference| " << diff;
}

}  // namespace

// make_ops builds each plan from config, device and build: the fused set on a CPU in fp32 and (with oneDNN
// in the build) in bf16, with its thread policy, fused optimizer and, for bf16, the weight copies; the
// reference set with OpenBLAS's threads (LibTorch's for its bf16 products).
TEST_F(Kernels, EachPlanHoldsItsOpsPrecisionThreadsAndOptimizer) {
  const auto arch = tiny_config(64);
  const torch::Device cpu(torch::kCPU);
  for (const auto k : {util::Kernels::kAuto, util::Kernels::kFused}) {
    const auto c = model::make_ops(k, cpu, torch::kFloat, arch, 1, 2);
    EXPECT_EQ(c.ops->name(), "fused");
    EXPECT_EQ(c.products, torch::kFloat);
    EXPECT_EQ(c.torch_threads, 2);
    EXPECT_EQ(c.blas_threads, 1);
    EXPECT_TRUE(c.fused_optimizer);
    EXPECT_EQ(c.weights, nullptr);
  }
  const auto ref = model::make_ops(util::Kernels::kReference, cpu, torch::kFloat, arch, 1, 2);
  EXPECT_EQ(ref.ops->name(), "reference");
  EXPECT_EQ(ref.torch_threads, 1);
  EXPECT_EQ(ref.blas_threads, 2);
  EXPECT_FALSE(ref.fused_optimizer);
  const auto ref_bf16 = model::make_ops(util::Kernels::kReference, cpu, torch::kBFloat16, arch, 1, 2);
  EXPECT_EQ(ref_bf16.ops->dtype(), torch::kBFloat16);
  EXPECT_EQ(ref_bf16.torch_threads, 2) << "oneDNN's bf16 products run on LibTorch's threads";
  EXPECT_EQ(ref_bf16.blas_threads, 1);
  if (!kn::bf16_products_built()) {
    const auto bf16 = model::make_ops(util::Kernels::kAuto, cpu, torch::kBFloat16, arch);
    EXPECT_EQ(bf16.ops->name(), "reference");
    EXPECT_NE(bf16.why.find("oneDNN"), std::string::npos) << bf16.why;
    GTEST_SKIP() << "this build has no oneDNN: the fused set's bf16 products are refused";
  }
  const auto bf16 = model::make_ops(util::Kernels::kFused, cpu, torch::kBFloat16, arch, 1, 2);
  EXPECT_EQ(bf16.ops->name(), "fused");
  EXPECT_EQ(bf16.ops->dtype(), torch::kBFloat16);
  EXPECT_EQ(bf16.products, torch::kBFloat16);
  ASSERT_NE(bf16.weights, nullptr);
  EXPECT_TRUE(bf16.fused_optimizer);
  EXPECT_NE(bf16.why.find("bf16 products (oneDNN)"), std::string::npos) << bf16.why;
}

TEST_F(Kernels, SplitProductsEqualOneProduct) {
  // Long M (row blocks), long N (column blocks), transposed and narrowed operands, accumulation.
  for (auto [M, K, N] : {std::array<int64_t, 3>{517, 64, 40}, {40, 96, 1001}, {300, 300, 300}, {3, 5, 7}}) {
    auto a = torch::randn({M, K}), b = torch::randn({N, K}).t(), c = torch::randn({M, N});
    auto want = torch::mm(a, b);
    expect_close(kn::mm(*scheduler_, a, b), want, 1e-5, "mm " + std::to_string(M) + "x" + std::to_string(N));
    auto acc = c.clone();
    kn::mm_into(*scheduler_, acc, a, b, /*accumulate=*/true);
    expect_close(acc, c + want, 1e-5, "accumulate");
    auto wide = torch::zeros({M, N + 9});
    auto view = wide.narrow(1, 4, N);
    kn::mm_into(*scheduler_, view, a, b);
    expect_close(view, want, 1e-5, "into a narrowed output");
    EXPECT_EQ(wide.narrow(1, 0, 4).abs().sum().item<float>(), 0.0f) << "wrote outside the view";
  }
}

TEST_F(Kernels, SeveralProductsAtOnce) {
  // One, two (a whole product per thread) and three products, one of them accumulating.
  auto a = torch::randn({300, 64}), b = torch::randn({64, 200}), c = torch::randn({120, 64}), d = torch::randn({64, 999});
  auto base = torch::randn({120, 999});
  for (size_t n : {1, 2, 3}) {
    auto o1 = torch::empty({300, 200}), o2 = torch::empty({120, 999}), o3 = base.clone();
    std::vector<kn::Product> all{{o1, a, b}, {o2, c, d}, {o3, c, d, /*accumulate=*/true}};
    all.resize(n);
    kn::mm_all(*scheduler_, all);
    expect_close(o1, torch::mm(a, b), 1e-5, "first");
    if (n > 1) expect_close(o2, torch::mm(c, d), 1e-5, "second");
    if (n > 2) expect_close(o3, base + torch::mm(c, d), 1e-5, "third, accumulated");
  }
}

TEST_F(Kernels, LinearValueAndGradients) {
  for (bool bias : {true, false}) {
    auto x = torch::randn({3, 37, 24}, torch::requires_grad());
    auto w = torch::randn({56, 24}, torch::requires_grad());
    auto b = bias ? torch::randn({56}, torch::requires_grad()) : torch::Tensor();
    auto g = torch::randn({3, 37, 56});
    auto y = kn::linear(scheduler_, x, w, b);
    (y * g).sum().backward();
    auto x2 = x.detach().clone().requires_grad_(), w2 = w.detach().clone().requires_grad_();
    auto b2 = bias ? b.detach().clone().requires_grad_() : torch::Tensor();
    auto want = torch::nn::functional::linear(x2, w2, b2);
    (want * g).sum().backward();
    expect_close(y, want, 1e-5, "value");
    expect_close(x.grad(), x2.grad(), 1e-5, "dx");
    expect_close(w.grad(), w2.grad(), 1e-5, "dw");
    if (bias) expect_close(b.grad(), b2.grad(), 1e-5, "db");
  }
}

// The AVX2 GELU and its derivative against LibTorch's gelu and gelu_backward over the whole float range
// that matters (and beyond: |x| up to 30, where the Gaussian's density underflows), 8-wide columns and a
// ragged tail; the backward's product with the kept derivative against gelu_backward, and the column sums
// (the product's, a plain tensor's) against LibTorch's sum.
TEST_F(Kernels, GeluSimdMatchesLibTorch) {
  if (widths().empty()) GTEST_SKIP() << "this CPU has no AVX2 + FMA: LibTorch's gelu and gelu_backward run instead";
  std::map<int64_t, std::pair<torch::Tensor, torch::Tensor>> first;  // value and derivative at the first width
  for (const int lanes : widths()) {
    kn::cap_simd_lanes(lanes);
    SCOPED_TRACE(std::to_string(lanes) + " lanes");
    for (const int64_t cols : {1024, 13}) {
      torch::manual_seed(11 + cols);  // the same values at every width
      const int64_t rows = 300;
      auto x = torch::cat({torch::linspace(-30, 30, 7 * cols), torch::randn({(rows - 7) * cols}) * 4}).view({rows, cols});
      auto g = torch::randn({rows, cols});
      auto y = torch::empty_like(x), d = torch::empty_like(x), y_only = torch::empty_like(x);
      kn::gelu_forward(x.data_ptr<float>(), y.data_ptr<float>(), d.data_ptr<float>(), x.numel());
      EXPECT_LE((y - torch::gelu(x)).abs().max().item<double>(), 1e-6 * 30) << "forward (|x| up to 30)";
      EXPECT_LE((d - at::gelu_backward(torch::ones_like(x), x)).abs().max().item<double>(), 1e-6) << "derivative";
      kn::gelu_forward(x.data_ptr<float>(), y_only.data_ptr<float>(), nullptr, x.numel());
      EXPECT_TRUE(torch::equal(y_only, y)) << "the forward without the derivative";
      auto in_place = x.clone();  // the derivative written over the input, as linear_act does
      kn::gelu_forward(in_place.data_ptr<float>(), y_only.data_ptr<float>(), in_place.data_ptr<float>(), x.numel());
      EXPECT_TRUE(torch::equal(in_place, d)) << "the derivative over the input";
      auto dx = torch::empty_like(x);
      auto sums = torch::full({cols}, 0.5f);  // added to, not overwritten
      kn::multiply_rows(g.data_ptr<float>(), d.data_ptr<float>(), dx.data_ptr<float>(), rows, cols,
                                    sums.data_ptr<float>());
      EXPECT_TRUE(torch::equal(dx, g * d)) << "dx = g * d exactly";
      const auto want = at::gelu_backward(g, x);
      EXPECT_LE((dx - want).abs().max().item<double>(), 1e-6) << cols << " columns";
      expect_close(sums, want.sum(0) + 0.5, 1e-5, "column sums");
      kn::multiply_rows(g.data_ptr<float>(), d.data_ptr<float>(), dx.data_ptr<float>(), rows, cols, nullptr);
      EXPECT_LE((dx - want).abs().max().item<double>(), 1e-6) << "without sums";
      auto plain = torch::full({cols}, 0.5f);
      kn::add_column_sums(g.data_ptr<float>(), rows, cols, plain.data_ptr<float>());
      expect_close(plain, g.sum(0) + 0.5, 1e-5, "plain column sums");
      // Every full 16-float vector has the same bits at both widths (the rest takes the scalar loop at 16).
      const int64_t full = x.numel() / 16 * 16;
      if (!first.count(cols)) first[cols] = {y.view(-1).narrow(0, 0, full), d.view(-1).narrow(0, 0, full)};
      EXPECT_TRUE(torch::equal(y.view(-1).narrow(0, 0, full), first[cols].first)) << "the GELU's bits depend on the width";
      EXPECT_TRUE(torch::equal(d.view(-1).narrow(0, 0, full), first[cols].second)) << "the derivative's bits depend on the width";
    }
  }
}

// The AVX2 softmax rows against LibTorch's softmax, logsumexp and softmax backward: a head-sized row, a
// ragged short one, one value, logits spread over 200 (most probabilities underflow), and rows holding a
// NaN or an infinity, which the loop leaves to LibTorch.
TEST_F(Kernels, SoftmaxSimdMatchesLibTorch) {
  double log_norm = 0.0;
  if (widths().empty()) GTEST_SKIP() << "this CPU has no AVX2 + FMA: LibTorch's softmax runs instead";
  for (const int lanes : widths()) {
    kn::cap_simd_lanes(lanes);
    SCOPED_TRACE(std::to_string(lanes) + " lanes");
    for (const auto& [n, spread] : {std::pair<int64_t, double>{8192, 5}, {13, 3}, {1, 1}, {1000, 200}, {37, 4}}) {
      auto x = torch::randn({n}) * spread, y = torch::empty({n});
      ASSERT_TRUE(kn::softmax_row(x.data_ptr<float>(), y.data_ptr<float>(), n, &log_norm)) << n;
      EXPECT_LE((y - torch::softmax(x, 0)).abs().max().item<double>(), 1e-6) << n << " values";
      EXPECT_NEAR(log_norm, x.to(torch::kDouble).logsumexp(0).item<double>(), 1e-6 * std::max(1.0, spread)) << n;
      auto dp = torch::randn({n}), ds = torch::empty({n});
      kn::softmax_backward_row(y.data_ptr<float>(), dp.data_ptr<float>(), ds.data_ptr<float>(), n);
      EXPECT_LE((ds - at::_softmax_backward_data(dp, y, 0, at::kFloat)).abs().max().item<double>(), 1e-6) << n;
    }
    for (const float bad : {std::nanf(""), INFINITY, -INFINITY}) {
      auto x = torch::randn({20});
      x[7] = bad;
      auto y = torch::full({20}, 3.0f);
      EXPECT_FALSE(kn::softmax_row(x.data_ptr<float>(), y.data_ptr<float>(), 20, &log_norm)) << bad;
      EXPECT_TRUE(torch::equal(y, torch::full({20}, 3.0f))) << "wrote a row it left to LibTorch";
    }
  }
}

// The attention's small products against LibTorch's: a, or a read transposed; alpha 1 and 1/8; beta 0 (c's
// old contents ignored, NaN here) and 1; sizes that are and are not multiples of the 6 x 16 blocks (N under
// 8, over 16 and ragged, one row, one k); every matrix inside a wider one, whose other columns must stay as
// they were. Each row's bits do not depend on the rows computed with it.
TEST_F(Kernels, SmallGemmMatchesLibTorch) {
  const std::vector<std::array<int64_t, 3>> sizes{{64, 128, 64}, {13, 37, 5},  {6, 16, 1}, {1, 3, 7},
                                                  {150, 8, 150}, {7, 24, 33}, {14, 20, 9}};
  for (const auto& [M, N, K] : sizes) {
    for (const bool ta : {false, true}) {
      for (const float beta : {0.0f, 1.0f}) {
        const float alpha = beta == 0.0f ? 1.0f : 0.125f;
        SCOPED_TRACE(std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K) + (ta ? " a^T" : "") +
                     " beta " + std::to_string(beta));
        const auto a = ta ? torch::randn({K, M + 2}) : torch::randn({M, K + 3});
        const auto b = torch::randn({K, N + 5});
        auto c = torch::randn({M, N + 4});
        const auto before = c.clone();
        if (beta == 0.0f) c.narrow(1, 0, N).fill_(NAN);
        const auto op_a = ta ? a.narrow(1, 0, M).t() : a.narrow(1, 0, K);
        const auto want = alpha * torch::mm(op_a, b.narrow(1, 0, N)) + beta * before.narrow(1, 0, N);
        kn::small_gemm(M, N, K, alpha, a.data_ptr<float>(), a.size(1), ta, b.data_ptr<float>(), b.size(1), beta,
                                   c.data_ptr<float>(), c.size(1));
        expect_close(c.narrow(1, 0, N), want, 1e-5, "product");
        EXPECT_TRUE(torch::equal(c.narrow(1, N, 4), before.narrow(1, N, 4))) << "wrote outside the product";
        // Rows [0, 7) and the rest computed apart: the same bits.
        if (M > 7) {
          auto split = beta == 0.0f ? torch::empty_like(c) : before.clone();
          const int64_t step = ta ? 1 : a.size(1);
          for (const auto& [lo, n] : {std::pair<int64_t, int64_t>{0, 7}, {7, M - 7}}) {
            kn::small_gemm(n, N, K, alpha, a.data_ptr<float>() + lo * step, a.size(1), ta, b.data_ptr<float>(),
                                       b.size(1), beta, split.data_ptr<float>() + lo * split.size(1), split.size(1));
          }
          EXPECT_TRUE(torch::equal(split.narrow(1, 0, N), c.narrow(1, 0, N))) << "a row's bits depend on its block";
        }
      }
    }
  }
  for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{128, 64}, {13, 9}, {8, 8}, {3, 20}}) {
    const auto src = torch::randn({rows, cols + 6});
    auto dst = torch::full({cols, rows + 2}, 7.0f);
    kn::transpose(src.data_ptr<float>(), rows, cols, src.size(1), dst.data_ptr<float>(), dst.size(1));
    EXPECT_TRUE(torch::equal(dst.narrow(1, 0, rows), src.narrow(1, 0, cols).t())) << rows << "x" << cols;
    EXPECT_TRUE(torch::equal(dst.narrow(1, rows, 2), torch::full({cols, 2}, 7.0f))) << "wrote outside the transpose";
  }
}

// The causal parts of a square product (the attention's): kColumns computes each block's columns up to its
// last row, the same bits as the whole product's, and leaves the columns after them as they were; kInnerTo
// and kInnerFrom sum over the k up to the block's last row or from its first, the whole product's bits when
// op(a) is zero where they skip (a causal softmax's weights, and those read transposed).
TEST_F(Kernels, SmallGemmCausalPartsMatchTheWholeProduct) {
  using kn::Causal;
  for (const int64_t T : {1, 7, 20, 130}) {
    for (const int64_t D : {5, 64}) {
      for (const bool ta : {false, true}) {
        SCOPED_TRACE("T " + std::to_string(T) + " D " + std::to_string(D) + (ta ? " a^T" : ""));
        // kColumns: (T x D) (D x T).
        const auto q = ta ? torch::randn({D, T}) : torch::randn({T, D}), kt = torch::randn({D, T});
        auto whole = torch::empty({T, T}), part = torch::full({T, T}, 7.0f);
        kn::small_gemm(T, T, D, 0.5f, q.data_ptr<float>(), q.size(1), ta, kt.data_ptr<float>(), T, 0.f,
                                   whole.data_ptr<float>(), T);
        kn::small_gemm(T, T, D, 0.5f, q.data_ptr<float>(), q.size(1), ta, kt.data_ptr<float>(), T, 0.f,
                                   part.data_ptr<float>(), T, Causal::kColumns);
        for (int64_t i = 0; i < T; i += kn::kSmallGemmRows) {
          const int64_t rows = std::min(kn::kSmallGemmRows, T - i), e = i + rows;
          EXPECT_TRUE(torch::equal(part.narrow(0, i, rows).narrow(1, 0, e), whole.narrow(0, i, rows).narrow(1, 0, e))) << i;
          EXPECT_TRUE(torch::equal(part.narrow(0, i, rows).narrow(1, e, T - e), torch::full({rows, T - e}, 7.0f))) << i;
        }
        // kInnerTo: op(a) zero after the diagonal; kInnerFrom: zero before it. (T x T) (T x D).
        const auto v = torch::randn({T, D});
        for (const Causal mode : {Causal::kInnerTo, Causal::kInnerFrom}) {
          const auto full = torch::randn({T, T});
          const auto op_a = mode == Causal::kInnerTo ? full.tril() : full.triu();
          const auto a = ta ? op_a.t().contiguous() : op_a.contiguous();
          auto c_whole = torch::empty({T, D}), c_part = torch::empty({T, D});
          kn::small_gemm(T, D, T, 1.f, a.data_ptr<float>(), T, ta, v.data_ptr<float>(), D, 0.f,
                                     c_whole.data_ptr<float>(), D);
          kn::small_gemm(T, D, T, 1.f, a.data_ptr<float>(), T, ta, v.data_ptr<float>(), D, 0.f,
                                     c_part.data_ptr<float>(), D, mode);
          EXPECT_TRUE(torch::equal(c_part, c_whole)) << (mode == Causal::kInnerTo ? "to" : "from");
          expect_close(c_part, torch::mm(op_a, v), 1e-4, "against LibTorch");
        }
      }
    }
  }
}

TEST_F(Kernels, LinearGeluValueAndGradients) {
  // 517 rows x 56 outputs (517 x 56 x 24 multiply-adds, past mm_all's split threshold): split by rows over
  // the threads, ragged; 5 rows x 4096 outputs: fewer rows than one piece, so one block on one thread.
  for (auto [rows, out] : {std::pair<int64_t, int64_t>{517, 56}, std::pair<int64_t, int64_t>{5, 4096}}) {
    auto x = torch::randn({1, rows, 24}, torch::requires_grad());
    auto w = torch::randn({out, 24}, torch::requires_grad());
    auto b = torch::randn({out}, torch::requires_grad());
    auto g = torch::randn({1, rows, out});
    auto y = kn::linear_act(scheduler_, x, w, b, model::MlpActivation::kGelu);
    (y * g).sum().backward();
    auto x2 = x.detach().clone().requires_grad_(), w2 = w.detach().clone().requires_grad_();
    auto b2 = b.detach().clone().requires_grad_();
    auto want = torch::gelu(torch::nn::functional::linear(x2, w2, b2));
    (want * g).sum().backward();
    expect_close(y, want, 1e-5, "value");
    expect_close(x.grad(), x2.grad(), 1e-5, "dx");
    expect_close(w.grad(), w2.grad(), 1e-5, "dw");
    expect_close(b.grad(), b2.grad(), 1e-5, "db");
  }
  // A frozen layer: no weight or bias gradient asked for, the input's still right.
  auto x = torch::randn({64, 24}, torch::requires_grad());
  auto w = torch::randn({56, 24}), b = torch::randn({56});
  kn::linear_act(scheduler_, x, w, b, model::MlpActivation::kGelu).sum().backward();
  auto x2 = x.detach().clone().requires_grad_();
  torch::gelu(torch::nn::functional::linear(x2, w, b)).sum().backward();
  expect_close(x.grad(), x2.grad(), 1e-5, "dx frozen");
  EXPECT_FALSE(w.grad().defined());
  EXPECT_FALSE(b.grad().defined());
  // Only the bias trains: its gradient is still right. Without autograd (sampling, eval) the forward keeps
  // no derivative and gives the same bits.
  auto bias = torch::randn({56}, torch::requires_grad());
  auto xf = torch::randn({64, 24});
  auto y = kn::linear_act(scheduler_, xf, w, bias, model::MlpActivation::kGelu);
  y.sum().backward();
  auto bias2 = bias.detach().clone().requires_grad_();
  torch::gelu(torch::nn::functional::linear(xf, w, bias2)).sum().backward();
  expect_close(bias.grad(), bias2.grad(), 1e-5, "db alone");
  const torch::NoGradGuard no_grad;
  EXPECT_TRUE(torch::equal(kn::linear_act(scheduler_, xf, w, bias, model::MlpActivation::kGelu), y)) << "forward without autograd";
}

// simd.h's relu^2 and its derivative: the bits of LibTorch's relu(x)^2 and 2 relu(x) at each width (a ragged
// tail included), the derivative also written over the input as linear_act does.
TEST_F(Kernels, Relu2SimdMatchesLibTorch) {
  for (const int lanes : widths()) {
    kn::cap_simd_lanes(lanes);
    SCOPED_TRACE(std::to_string(lanes) + " lanes");
    for (const int64_t n : {4096, 37}) {
      const auto x = torch::cat({torch::tensor({0.0f, -0.0f, 1e-30f, -1e-30f}), torch::randn({n - 4}) * 3});
      auto y = torch::empty_like(x), d = torch::empty_like(x);
      kn::relu2_forward(x.data_ptr<float>(), y.data_ptr<float>(), d.data_ptr<float>(), n);
      EXPECT_TRUE(torch::equal(y, torch::relu(x).square())) << n << " values";
      EXPECT_TRUE(torch::equal(d, torch::relu(x) * 2)) << n << " derivatives";
      auto in_place = x.clone(), y_only = torch::empty_like(x);
      kn::relu2_forward(in_place.data_ptr<float>(), y_only.data_ptr<float>(), in_place.data_ptr<float>(), n);
      EXPECT_TRUE(torch::equal(in_place, d)) << "the derivative over the input";
      kn::relu2_forward(x.data_ptr<float>(), y_only.data_ptr<float>(), nullptr, n);
      EXPECT_TRUE(torch::equal(y_only, y)) << "the value without the derivative";
    }
  }
}

// relu^2 inside the product's threads, with and without a bias (model.bias false), against LibTorch's ops,
// at each vector width.
TEST_F(Kernels, LinearRelu2WithAndWithoutBias) {
  for (const auto& [lanes, with_bias] : {std::pair<int, bool>{16, true}, {16, false}, {8, true}, {8, false}}) {
    kn::cap_simd_lanes(lanes);
    SCOPED_TRACE(std::to_string(lanes) + " lanes at most");
    auto x = torch::randn({517, 24}, torch::requires_grad());
    auto w = torch::randn({56, 24}, torch::requires_grad());
    auto b = with_bias ? torch::randn({56}, torch::requires_grad()) : torch::Tensor();
    auto g = torch::randn({517, 56});
    auto y = kn::linear_act(scheduler_, x, w, b, model::MlpActivation::kRelu2);
    (y * g).sum().backward();
    auto x2 = x.detach().clone().requires_grad_(), w2 = w.detach().clone().requires_grad_();
    auto b2 = with_bias ? b.detach().clone().requires_grad_() : torch::Tensor();
    auto want = torch::relu(torch::nn::functional::linear(x2, w2, b2)).square();
    (want * g).sum().backward();
    expect_close(y, want, 1e-5, "relu2 value");
    expect_close(x.grad(), x2.grad(), 1e-5, "relu2 dx");
    expect_close(w.grad(), w2.grad(), 1e-5, "relu2 dw");
    if (with_bias) expect_close(b.grad(), b2.grad(), 1e-5, "relu2 db");
    auto gelu = kn::linear_act(scheduler_, x.detach(), w.detach(), with_bias ? b.detach() : torch::Tensor(), model::MlpActivation::kGelu);
    expect_close(gelu, torch::gelu(torch::nn::functional::linear(x2.detach(), w2.detach(), with_bias ? b2.detach() : torch::Tensor())),
                 1e-5, "gelu without bias");
  }
}

TEST_F(Kernels, AttentionValueAndGradients) {
  // simd.h's products and softmax rows, at each vector width.
  for (const auto& sizes : {std::array<int64_t, 4>{149, 24, 3, 16}, {128, 128, 2, 16}, {149, 24, 3, 8}}) {
    const int64_t T = sizes[0], C = sizes[1], H = sizes[2], lanes = sizes[3];  // named: the lambdas below use them
    kn::cap_simd_lanes(static_cast<int>(lanes));
    SCOPED_TRACE("T " + std::to_string(T) + " C " + std::to_string(C) + ", " + std::to_string(lanes) + " lanes at most");
    // T 149, D 8: the last of the 6-row blocks of the causal products 5 rows; T 128, D 64: config S's heads.
    const int64_t B = 3, D = C / H;
    auto qkv = torch::randn({B, T, 3 * C}, torch::requires_grad());
    auto g = torch::randn({B, T, C});
    auto y = kn::causal_attention(qkv, H);
    (y * g).sum().backward();
    auto qkv2 = qkv.detach().clone().requires_grad_();
    auto parts = qkv2.split(C, 2);
    auto heads = [&](const torch::Tensor& t) { return t.view({B, T, H, D}).transpose(1, 2); };
    auto want = model::attention_reference(heads(parts[0]), heads(parts[1]), heads(parts[2]), torch::kFloat)
                    .transpose(1, 2).reshape({B, T, C});
    (want * g).sum().backward();
    expect_close(y, want, 1e-5, "value");
    expect_close(qkv.grad(), qkv2.grad(), 1e-5, "dqkv");
    // Position t sees nothing after it: changing the last position leaves every earlier output alone.
    auto changed = qkv.detach().clone();
    changed.select(1, T - 1).normal_();
    expect_close(kn::causal_attention(changed, H).narrow(1, 0, T - 1), y.detach().narrow(1, 0, T - 1), 0.0, "causal");
  }
}

// kernels::prepare_qk against the reference set's tensor ops (Ops::prepare_qk): values and the gradient of
// qkv, with and without qk_norm and rope, at a table offset (positions 5..5+T-1), at each vector width; head
// sizes 8 (all of a half in the scalar tail), 40 (a vector and a tail) and 64 (config S's: whole vectors).
TEST_F(Kernels, PrepareQkFollowsTheReference) {
  const model::ReferenceOps ref;
  for (const int lanes : widths()) {
    for (const int64_t D : {8, 40, 64}) {
      kn::cap_simd_lanes(lanes);
      SCOPED_TRACE(std::to_string(lanes) + " lanes at most, head size " + std::to_string(D));
      const int64_t B = 3, T = 7, H = 4, C = H * D;
      auto [cos, sin] = model::rotary_tables(T, D, 500.0, 5);
      for (bool norm : {false, true}) {
        for (bool rope : {false, true}) {
          if (!norm && !rope) continue;
          const auto x = (torch::randn({B, T, 3 * C}) * 2).requires_grad_();
          const auto x2 = x.detach().clone().requires_grad_();
          const auto c = rope ? cos : torch::Tensor(), s = rope ? sin : torch::Tensor();
          const auto got = kn::prepare_qk(x, H, norm, c, s), want = ref.prepare_qk(x2, H, norm, c, s);
          expect_close(got, want.detach(), 1e-5, "prepare_qk");
          EXPECT_TRUE(torch::equal(got.narrow(2, 2 * C, C), x.detach().narrow(2, 2 * C, C))) << "v as it is";
          const auto g = torch::randn({B, T, 3 * C});
          (got * g).sum().backward();
          (want * g).sum().backward();
          expect_close(x.grad(), x2.grad(), 1e-5, "prepare_qk gradient");
        }
      }
    }
  }
}

TEST_F(Kernels, HeadLossValueAndGradients) {
  // 2,300 rows: more than one 2 x 1024-row block and not a multiple of it; a frozen table (no weight gradient).
  // An incoming gradient of 1 hands the kept gradients over as they are; another (gradient accumulation's
  // scaled loss) scales them.
  for (auto [weight_grad, scale] : {std::pair{true, 1.0}, std::pair{true, 0.5}, std::pair{false, 0.5}}) {
    const int64_t N = 2300, C = 32, V = 301;
    auto h = torch::randn({N, C}, torch::requires_grad());
    auto w = (torch::randn({V, C}) * 0.5).requires_grad_(weight_grad);
    auto y = torch::randint(V, {N});
    auto loss = kn::next_token_loss(scheduler_, h, w, y);
    (loss * scale).backward();
    auto h2 = h.detach().clone().requires_grad_(), w2 = w.detach().clone().requires_grad_(weight_grad);
    auto want = model::chunked_next_token_loss(h2, w2, y, 256);
    (want * scale).backward();
    EXPECT_NEAR(loss.item<double>(), want.item<double>(), 1e-5);
    expect_close(h.grad(), h2.grad(), 1e-5, "dh");
    if (weight_grad) expect_close(w.grad(), w2.grad(), 1e-5, "dw");
    EXPECT_FALSE(weight_grad ? false : w.grad().defined()) << "a frozen table got a gradient";
  }
  // Soft-capped (model.logit_softcap): logits of magnitude ~10 against a cap of 3, so the cap bites.
  {
    const int64_t N = 1500, C = 16, V = 97;
    auto h = (torch::randn({N, C}) * 3).requires_grad_(), w = (torch::randn({V, C})).requires_grad_();
    auto y = torch::randint(V, {N});
    auto loss = kn::next_token_loss(scheduler_, h, w, y, 3.0);
    loss.backward();
    auto h2 = h.detach().clone().requires_grad_(), w2 = w.detach().clone().requires_grad_();
    auto want = torch::nn::functional::cross_entropy(3.0 * torch::tanh(torch::mm(h2, w2.t()) / 3.0), y);
    want.backward();
    EXPECT_NEAR(loss.item<double>(), want.item<double>(), 1e-5) << "soft-capped";
    expect_close(h.grad(), h2.grad(), 1e-5, "soft-capped dh");
    expect_close(w.grad(), w2.grad(), 1e-5, "soft-capped dw");
    EXPECT_GT(std::abs(loss.item<double>() - kn::next_token_loss(scheduler_, h, w, y).item<double>()), 0.1) << "the cap bites";
  }
  torch::NoGradGuard no_grad;  // evaluation: the value only
  auto h = torch::randn({77, 16}), w = torch::randn({50, 16});
  auto y = torch::randint(50, {7, 11});
  EXPECT_NEAR(kn::next_token_loss(scheduler_, h.view({7, 11, 16}), w, y).item<double>(),
              model::chunked_next_token_loss(h, w, y).item<double>(), 1e-5);
}

// balance::cut: every row of every span in exactly one piece, each thread's work within two granules of its
// share, every cut inside a span on the unit grid and no piece under kMinPieceWork multiply-adds.
TEST(Balance, CutsCoverEveryRowOnceInProportion) {
  namespace bl = kn::balance;
  const std::vector<bl::Span> spans{{2048, 768.0 * 256}, {768, 2048.0 * 256}, {5, 64.0 * 64}};
  double total = 0;
  for (const auto& s : spans) total += static_cast<double>(s.rows) * s.row_work;
  for (const std::vector<double>& shares :
       {std::vector<double>{0.5, 0.5}, {0.3, 0.7}, {0.9, 0.1}, {0.2, 0.3, 0.5}, {1.0}, {0.0, 1.0}}) {
    const auto pieces = bl::cut(spans, shares, 12);
    ASSERT_EQ(pieces.size(), shares.size());
    std::vector<std::vector<int>> seen;
    for (const auto& s : spans) seen.emplace_back(static_cast<size_t>(s.rows), 0);
    for (size_t t = 0; t < shares.size(); ++t) {
      double work = 0;
      for (const bl::Piece& k : pieces[t]) {
        const bl::Span& s = spans[k.span];
        ASSERT_GT(k.n, 0);
        ASSERT_LE(k.lo + k.n, s.rows);
        for (int64_t r = k.lo; r < k.lo + k.n; ++r) ++seen[k.span][static_cast<size_t>(r)];
        work += static_cast<double>(k.n) * s.row_work;
        if (k.lo > 0 || k.n < s.rows) {  // a piece cut from its span
          EXPECT_EQ(k.lo % 12, 0) << "a cut off the unit grid";
          EXPECT_GE(static_cast<double>(k.n) * s.row_work, static_cast<double>(bl::kMinPieceWork)) << "a small piece";
        }
      }
      EXPECT_NEAR(work, shares[t] * total, 2 * 12 * 2048.0 * 256) << "thread " << t << " of " << shares.size();
    }
    for (const auto& rows : seen) {
      for (const int n : rows) ASSERT_EQ(n, 1) << "a row in no piece or in two";
    }
  }
}

// The threads' shares decide only who makes which rows: a linear layer's two backward products and the
// loss head's value and gradients are the same to the bit for equal, lopsided and measured shares.
TEST_F(Kernels, ResultsKeepTheirBitsWhateverTheThreadsShares) {
  if (kn::balance::row_unit() == 0) GTEST_SKIP() << "no row cut keeps this BLAS's bits: the shares stay equal";
  auto x = torch::randn({517, 96}), w = torch::randn({300, 96}), g = torch::randn({517, 300});
  auto table = torch::randn({1000, 64}, torch::requires_grad());
  auto h = torch::randn({700, 64}, torch::requires_grad());
  auto y = torch::randint(1000, {700});
  std::vector<torch::Tensor> first;
  for (const std::vector<double>& shares : {std::vector<double>{}, {0.5, 0.5}, {0.25, 0.75}, {0.8, 0.2}}) {
    scheduler_->pin_shares(shares);
    auto dx = torch::empty({517, 96}), dw = torch::empty({300, 96});
    kn::mm_all(*scheduler_, {{dx, g, w}, {dw, g.t(), x}});
    h.mutable_grad() = torch::Tensor();
    table.mutable_grad() = torch::Tensor();
    auto loss = kn::next_token_loss(scheduler_, h, table, y);
    loss.backward();
    const std::vector<torch::Tensor> now{dx, dw, loss, h.grad(), table.grad()};
    if (first.empty()) first = now;
    for (size_t i = 0; i < now.size(); ++i) {
      EXPECT_TRUE(torch::equal(now[i], first[i])) << "result " << i << " changed with shares " << shares.size();
    }
  }
  scheduler_->pin_shares({});
}

// The speeds a linear layer's products measure go into the scheduler it was given, forward and backward (the
// autograd function keeps it), and into no other: two fused sets keep their own.
TEST_F(Kernels, ProductsRecordIntoTheSchedulerTheyWereGiven) {
  if (kn::balance::row_unit() == 0) GTEST_SKIP() << "no row cut keeps this BLAS's bits: the shares stay equal";
  const auto shares = [](kn::Scheduler& s) { return s.plan(kn::balance::Region::kProducts, 2).shares; };
  const std::vector<double> equal{0.5, 0.5};
  auto other = c10::make_intrusive<kn::Scheduler>();
  auto x = torch::randn({517, 96}, torch::requires_grad());
  auto w = torch::randn({300, 96}, torch::requires_grad());
  ASSERT_EQ(shares(*scheduler_), equal) << "a new scheduler has measured nothing";
  auto y = kn::linear(scheduler_, x, w, torch::Tensor());
  const std::vector<double> after_forward = shares(*scheduler_);
  EXPECT_NE(after_forward, equal) << "the forward product measured nothing";
  y.sum().backward();
  EXPECT_NE(shares(*scheduler_), after_forward) << "the backward products measured nothing";
  EXPECT_EQ(shares(*other), equal) << "another scheduler took the measurements";
}

TEST_F(Kernels, HeadLossOfAnAlmostImpossibleTarget) {
  // The last row's target logit lies ~300 nats below the row's maximum: its probability underflows
  // float32, yet the loss stays finite and exact (the row's log-sum-exp is recomputed from its own hidden
  // state, found at its offset) and the gradients still match.
  const int64_t C = 4, V = 5;
  auto h = torch::tensor({{0.1f, 0.2f, 0.3f, 0.4f}, {-0.5f, 0.5f, 0.0f, 1.0f}, {10.0f, 0.0f, 0.0f, 0.0f}})
               .requires_grad_();
  auto w = torch::randn({V, C});
  w[1] = torch::tensor({-15.0f, 0.0f, 0.0f, 0.0f});
  w[2] = torch::tensor({15.0f, 0.0f, 0.0f, 0.0f});
  auto w1 = w.clone().requires_grad_();
  auto y = torch::tensor({int64_t{3}, int64_t{0}, int64_t{1}});
  auto loss = kn::next_token_loss(scheduler_, h, w1, y);
  loss.backward();
  auto h2 = h.detach().clone().requires_grad_(), w2 = w.clone().requires_grad_();
  auto want = model::chunked_next_token_loss(h2, w2, y, 256);
  want.backward();
  ASSERT_GT(want.item<double>(), 90.0);  // the underflowing row dominates the mean
  EXPECT_NEAR(loss.item<double>(), want.item<double>(), 1e-5 * want.item<double>());
  expect_close(h.grad(), h2.grad(), 1e-5, "dh");
  expect_close(w1.grad(), w2.grad(), 1e-5, "dw");
  // A target outside the vocabulary is refused, never read or written past the row.
  EXPECT_THROW(kn::next_token_loss(scheduler_, h.detach(), w, torch::tensor({int64_t{0}, int64_t{V}, int64_t{1}})), c10::Error);
  EXPECT_THROW(kn::next_token_loss(scheduler_, h.detach(), w, torch::tensor({int64_t{-1}, int64_t{0}, int64_t{1}})), c10::Error);
}

// kernels::embedding: the rows of the table; its gradient (sparse: the ids' rows) summed by autograd with the
// tied head's dense one (a table used twice and a repeated id) into a dense .grad, or left sparse when no
// head gradient of that table is in the same pass.
TEST_F(Kernels, EmbeddingGradientGoesIntoTheTiedHeads) {
  auto table = torch::randn({11, 8}).requires_grad_(), plain = table.detach().clone().requires_grad_();
  auto ids = torch::tensor({{1, 4, 4}, {0, 10, 1}});
  auto x = kn::embedding(table, ids), want = torch::embedding(plain, ids);
  expect_close(x, want, 0, "rows");
  auto y = torch::tensor({{4, 4, 2}, {3, 1, 0}});
  kn::next_token_loss(scheduler_, torch::tanh(x) * 2, table, y).backward();
  model::chunked_next_token_loss(torch::tanh(want) * 2, plain, y).backward();
  expect_close(table.grad(), plain.grad(), 1e-6, "tied table");
  EXPECT_FALSE(table.grad().is_sparse());
  table.mutable_grad() = torch::Tensor();
  plain.mutable_grad() = torch::Tensor();
  (kn::embedding(table, ids) * 3).sum().backward();  // no head: the lookup's sparse gradient alone
  (torch::embedding(plain, ids) * 3).sum().backward();
  ASSERT_TRUE(table.grad().is_sparse());
  expect_close(table.grad().to_dense(), plain.grad(), 0, "table alone");
  // Other gradients of the table in the same pass (two summed losses, an extra term), a scaled loss, and a
  // retained graph run twice: never a row lost or counted twice.
  // One loss for both paths: `embed` and `head` are the fused kernels or LibTorch's ops, `t` their table.
  auto build = [&](auto embed, auto head, const torch::Tensor& t, int which) {
    auto l = head(torch::tanh(embed(t, ids)) * 2, t, y);
    if (which == 0) return l + head(torch::tanh(embed(t, ids)), t, y.flip(1));
    if (which == 1) return l + t.square().sum() * 0.01;
    return l * 0.5;
  };
  auto fused = [&](int which) {
    return build([](const torch::Tensor& t, const torch::Tensor& i) { return kn::embedding(t, i); },
                 [this](const torch::Tensor& h, const torch::Tensor& t, const torch::Tensor& y) {
                   return kn::next_token_loss(scheduler_, h, t, y);
                 },
                 table, which);
  };
  auto reference = [&](int which) {
    return build([](const torch::Tensor& t, const torch::Tensor& i) { return torch::embedding(t, i); },
                 [](const torch::Tensor& h, const torch::Tensor& t, const torch::Tensor& y) {
                   return model::chunked_next_token_loss(h, t, y);
                 },
                 plain, which);
  };
  for (int which : {0, 1, 2, 3}) {
    table.mutable_grad() = torch::Tensor();
    plain.mutable_grad() = torch::Tensor();
    if (which == 3) {  // retained: the second backward adds the same gradient again
      auto l = fused(2), r = reference(2);
      l.backward({}, /*retain_graph=*/true);
      l.backward();
      r.backward({}, /*retain_graph=*/true);
      r.backward();
    } else {
      fused(which).backward();
      reference(which).backward();
    }
    ASSERT_FALSE(table.grad().is_sparse()) << "case " << which;
    expect_close(table.grad(), plain.grad(), 1e-6, "case " + std::to_string(which));
  }
}

TEST_F(Kernels, WholeModelLossAndGradientsMatchThePlainOps) {
  auto cfg = tiny_config(97);
  cfg.d_model = 32;
  cfg.n_heads = 4;
  cfg.max_seq_len = 24;
  const torch::Device cpu(torch::kCPU);
  model::Gpt plain(cfg, model::make_ops(util::Kernels::kReference, cpu, torch::kFloat, cfg).ops);
  torch::manual_seed(7);
  model::Gpt fused_model(cfg, model::make_ops(util::Kernels::kFused, cpu, torch::kFloat, cfg).ops);
  auto x = torch::randint(97, {5, 24}), y = torch::randint(97, {5, 24});
  std::vector<torch::Tensor> grads[2];
  double losses[2];
  torch::Tensor logits[2];
  for (int fused : {0, 1}) {
    model::Gpt& m = fused ? fused_model : plain;
    {
      torch::NoGradGuard no_grad;
      logits[fused] = m->forward(x);
    }
    m->zero_grad();
    auto loss = m->forward(x, y);
    loss.backward();
    losses[fused] = loss.item<double>();
    for (auto& p : m->parameters()) grads[fused].push_back(p.grad().clone());
  }
  EXPECT_NEAR(losses[0], losses[1], 1e-5);
  expect_close(logits[1], logits[0], 1e-5, "logits");
  // The cached decoder (the reference ops for a cache) continues where the fused forward's logits say.
  model::KvCache cache;
  auto step_logits = fused_model->forward_cached(x.narrow(0, 0, 1), cache);  // (1,V): the last position
  expect_close(step_logits, logits[1].select(0, 0).select(0, 23).unsqueeze(0), 1e-5, "cached decoder");
  for (size_t i = 0; i < grads[0].size(); ++i) expect_close(grads[1][i], grads[0][i], 1e-5, "parameter " + std::to_string(i));
}

}  // namespace lm::test

