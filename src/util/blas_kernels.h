// Which OpenBLAS kernels a process runs: the widest this CPU supports, unless the user named some.
// OpenBLAS picks its kernels once, when it is loaded, from OPENBLAS_CORETYPE or from its own table of CPU
// models; bookworm's 0.3.21 does not know Intel family-6 models newer than its table (Emerald Rapids,
// model 207) and falls through to Prescott's SSE3 kernels, 3-5x slower than its AVX-512 ones there (fixed
// upstream in 0.3.25). So before OpenBLAS loads (the front executable, or lmtrain_full started directly,
// which re-executes itself once), the rule below sets OPENBLAS_CORETYPE for the process when OpenBLAS would
// choose narrower kernels than the CPU runs. No LibTorch here: the front links this.
#pragma once

#include <string>
#include <string_view>

namespace lm::util {

/// Vector width of x86 kernels, narrowest first.
enum class VectorClass { kOther, kAvx, kAvx2, kAvx512 };

/// The class of an OpenBLAS x86 core name ("Prescott" kOther, "Sandybridge" kAvx, "Haswell"/"Zen" kAvx2,
/// "SkylakeX"/"Cooperlake"/"SapphireRapids" kAvx512; any case); kOther for anything else.
VectorClass class_of_core(std::string_view core);

/// What this CPU runs (cpuid): kAvx512 with AVX-512 F, CD, BW, DQ and VL (what OpenBLAS's SkylakeX kernels
/// use), kAvx2 with AVX2 and FMA, else kOther.
VectorClass cpu_vector_class();

/// The decision: `set` is the OPENBLAS_CORETYPE to set ("" = leave the environment as it is) and `why` the
/// log's words after the kernels' name.
struct BlasKernelChoice {
  std::string set;
  std::string why;
};

/// The rule. `cpu`: what the CPU runs; `own`: the kernels OpenBLAS picks by itself ("" when no OpenBLAS is
/// the BLAS); `user`: OPENBLAS_CORETYPE as the user set it (null when unset). The user's variable always
/// wins; else SkylakeX for kAvx512 and Haswell for kAvx2 where OpenBLAS's own choice is of a narrower class;
/// else OpenBLAS's own choice.
BlasKernelChoice choose_blas_kernels(VectorClass cpu, std::string_view own, const char* user);

/// Applies the rule to this process's environment, before OpenBLAS is loaded into it: asks the libblas.so.3
/// that LibTorch would load which kernels it picks (loading it here, into a process about to exec), sets
/// OPENBLAS_CORETYPE when the rule says so, and records the decision in LMTRAIN_BLAS_KERNELS for the log.
/// Does nothing when the decision is already recorded (a child of an lmtrain process inherits it).
void choose_blas_kernels_before_loading();

/// True when this process runs OpenBLAS's kernels without the rule having been applied before OpenBLAS
/// loaded (lmtrain_full or the test build started directly) and the rule would choose other kernels: the
/// caller should then call choose_blas_kernels_before_loading() and execute itself again. Records the
/// decision when it agrees with what runs.
bool blas_kernels_need_restart();

/// "SkylakeX (chosen for this CPU; this OpenBLAS would run Prescott's)", "Haswell (OPENBLAS_CORETYPE
/// from the environment)", "SkylakeX (OpenBLAS's own choice for this CPU)", or "" when OpenBLAS is not
/// loaded: the kernels running in this process and why.
std::string describe_blas_kernels();

}  // namespace lm::util
