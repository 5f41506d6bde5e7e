#include "model/fused/bf16_products.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <map>
#include <mutex>
#include <stdexcept>
#include <tuple>

#ifdef LMTRAIN_WITH_ONEDNN
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace lm::model::kernels {

#ifdef LMTRAIN_WITH_ONEDNN

namespace {

// A product's shape, strides and mode: the primitive made for one serves every call of that key.
using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, bool, float, int>;

// oneDNN's CPU engine and the primitives made so far. A memo, not state: a primitive is a function of its key
// (and of the threads, part of the key), made once, the same result every call.
struct Matmuls {
  std::mutex mu;
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  std::map<Key, std::pair<dnnl::matmul, std::string>> made;
  std::string last_isa;
};

Matmuls& matmuls() {
  static Matmuls m;
  return m;
}

dnnl::memory::desc desc_of(const at::Tensor& t, dnnl::memory::data_type type) {
  return dnnl::memory::desc({t.size(0), t.size(1)}, type, {t.stride(0), t.stride(1)});
}

}  // namespace

bool bf16_products_built() { return true; }

void mm_bf16(at::Tensor& out, const at::Tensor& a, const at::Tensor& b, bool accumulate, double alpha) {
  TORCH_CHECK(!at::in_parallel_region(), "[kernels] mm_bf16: expected a call outside a parallel region, got one inside");
  TORCH_CHECK(a.scalar_type() == at::kBFloat16 && b.scalar_type() == at::kBFloat16 && out.scalar_type() == at::kFloat,
              "[kernels] mm_bf16: expected bf16 operands and an fp32 result, got ", a.scalar_type(), ", ",
              b.scalar_type(), " and ", out.scalar_type());
  TORCH_CHECK(out.stride(1) == 1, "[kernels] mm_bf16: expected a result with contiguous rows, got stride ", out.stride(1));
  const auto f = static_cast<float>(alpha);
  const Key key{a.size(0), a.size(1), b.size(1), a.stride(0), a.stride(1), b.stride(0), b.stride(1), out.stride(0),
                accumulate, f, at::get_num_threads()};
  Matmuls& m = matmuls();
  std::unique_lock<std::mutex> lock(m.mu);
  auto it = m.made.find(key);
  if (it == m.made.end()) {
    using dt = dnnl::memory::data_type;
    dnnl::primitive_attr attr;
    if (f != 1.0f) attr.set_output_scales(0, {f});
    if (accumulate) {
      dnnl::post_ops ops;
      ops.append_sum(1.0f);  // out = alpha a b + out
      attr.set_post_ops(ops);
    }
    const dnnl::matmul::desc d(desc_of(a, dt::bf16), desc_of(b, dt::bf16), desc_of(out, dt::f32));
    const dnnl::matmul::primitive_desc pd(d, attr, m.engine);
    it = m.made.emplace(key, std::make_pair(dnnl::matmul(pd), std::string(pd.impl_info_str()))).first;
  }
  const dnnl::matmul prim = it->second.first;
  m.last_isa = it->second.second;
  lock.unlock();
  using dt = dnnl::memory::data_type;
  dnnl::memory ma(desc_of(a, dt::bf16), m.engine, a.data_ptr());
  dnnl::memory mb(desc_of(b, dt::bf16), m.engine, b.data_ptr());
  dnnl::memory mc(desc_of(out, dt::f32), m.engine, out.data_ptr());
  dnnl::stream s(m.engine);
  prim.execute(s, {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}});
  s.wait();
}

std::string bf16_products_isa() {
  Matmuls& m = matmuls();
  const std::lock_guard<std::mutex> lock(m.mu);
  return m.last_isa;
}

#else

bool bf16_products_built() { return false; }

void mm_bf16(at::Tensor&, const at::Tensor&, const at::Tensor&, bool, double) {
  throw std::logic_error("[kernels] mm_bf16: expected a build with oneDNN (LMTRAIN_WITH_ONEDNN), got one without. "
                         "Hint: make_ops refuses bf16 products there; install libdnnl-dev and rebuild");
}

std::string bf16_products_isa() { return ""; }

#endif

}  // namespace lm::model::kernels
