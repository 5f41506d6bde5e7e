// The fused set's bf16 matrix products: bf16 operands, fp32 accumulation, an fp32 result, through oneDNN's
// matmul (the library LibTorch itself multiplies bf16 with: AMX tiles or AVX512-BF16 where the CPU has them).
// LibTorch's own bf16 product would round its result to bf16 and need a pass to widen it; oneDNN writes fp32
// and adds into fp32 in the same pass. Built when CMake finds oneDNN's headers (LMTRAIN_WITH_ONEDNN; Debian's
// libdnnl-dev, the same 2.6 as the libdnnl.so.2 LibTorch loads); without them the fused set refuses bf16.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>

namespace lm::model::kernels {

/// True when this build multiplies bf16 through oneDNN (LMTRAIN_WITH_ONEDNN).
bool bf16_products_built();

/// out (M,N) fp32 = alpha a (M,K) @ b (K,N), or out += alpha a @ b when `accumulate`, for bf16 a and b that
/// are strided 2-D views with a unit stride in one dimension (out: in its second). Runs on oneDNN's OpenMP
/// threads, which are LibTorch's. REQUIRES: outside a parallel region (a oneDNN primitive made for the pool
/// computes only its first thread's share when run inside one), bf16_products_built().
void mm_bf16(at::Tensor& out, const at::Tensor& a, const at::Tensor& b, bool accumulate = false, double alpha = 1.0);

/// The oneDNN implementation the last product ran ("brg:avx512_core_amx", "brg:avx512_core_bf16", ...), or
/// "" before any: for the log and the benchmarks.
std::string bf16_products_isa();

}  // namespace lm::model::kernels
