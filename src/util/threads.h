// Compute-thread control: LibTorch intra-op threads and OpenBLAS's own thread pool. LibTorch's
// set_num_threads does not reach OpenBLAS, so both are set here, explicitly (measured on 2 vCPUs: one
// LibTorch thread over two BLAS threads trains config S ~1.4x faster than one over one, while two LibTorch
// threads over two BLAS threads oversubscribe and are slower; see docs/ARCHITECTURE.md "Threads and memory").
#pragma once

#include <string>

namespace lm::util {

/// Sets LibTorch's intra-op threads to `torch_threads` and OpenBLAS's to `blas_threads` (when OpenBLAS is
/// loaded). REQUIRES: both >= 1.
void set_compute_threads(int torch_threads, int blas_threads);

/// The cores this process may run on (its CPU affinity mask, which a cpuset or taskset narrows), at least 1.
int usable_cores();

/// run.blas_threads resolved: `configured` when > 0, else (0 = auto) usable_cores() divided among the
/// processes of the run on this machine: LOCAL_WORLD_SIZE when a launcher (torchrun) set it, else
/// `processes`; at least 1.
int resolve_blas_threads(int configured, int processes);

/// OpenBLAS's thread count now, or 0 when OpenBLAS is not the loaded BLAS.
int blas_threads();

/// The OpenBLAS kernels (its OPENBLAS_CORETYPE) lmtrain asks for on a CPU of `vendor` (cpuid's vendor string,
/// "AuthenticAMD", "GenuineIntel", ...) that can (`avx512`: AVX-512 F, CD, BW, DQ and VL usable) or cannot
/// run AVX-512: "SKYLAKEX" for AMD with AVX-512, else "" (OpenBLAS's own choice). OpenBLAS 0.3.21 (Debian
/// bookworm) serves every AMD CPU with its AVX2 kernels (Haswell), about half as fast as its AVX-512 ones on
/// an AVX-512 Zen (measured on a Zen 5: 2048 x 2048 fp32 products at 101 vs 181 GFLOP/s on one core).
std::string preferred_blas_core(const std::string& vendor, bool avx512);

/// preferred_blas_core() of this CPU, or "" when OPENBLAS_CORETYPE is already set (the user's choice wins).
std::string blas_core_to_set();

/// Sets OPENBLAS_CORETYPE to blas_core_to_set() in this process's environment when that is not empty, so the
/// processes it starts load OpenBLAS with those kernels (OpenBLAS reads the variable once, when it is loaded).
/// Returns whether it set it.
bool set_blas_core();

/// The kernels the loaded OpenBLAS runs ("Haswell", "SkylakeX", ...), or "" when OpenBLAS is not loaded.
std::string blas_core();

/// For an executable that loads OpenBLAS itself (lmtrain_full started directly, not by the front): when
/// blas_core_to_set() names other kernels than the loaded ones, sets OPENBLAS_CORETYPE and replaces this
/// process with a fresh start of the same executable and `argv`, which loads them. Returns only when nothing
/// is to change or the new start failed (the loaded kernels then stay).
void restart_for_blas_core(char** argv);

}  // namespace lm::util
