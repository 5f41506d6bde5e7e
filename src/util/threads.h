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

/// The kernels the loaded OpenBLAS runs ("Haswell", "SkylakeX", ...), or "" when OpenBLAS is not loaded.
std::string blas_core();

}  // namespace lm::util
