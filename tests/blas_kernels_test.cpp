// The OpenBLAS kernel rule (util/blas_kernels.h): the table of CPU class x OpenBLAS's own choice x the user's
// variable, and the real binaries naming the kernels they run, through the front and started directly.
#include <gtest/gtest.h>

#include <string>

#include "test_util.h"
#include "util/blas_kernels.h"

namespace lm::test {

namespace {

using util::VectorClass;

// The kernels an `lmtrain --version` line names ("" when none), e.g. "SkylakeX (chosen for ...)".
std::string version_kernels(const std::string& output) {
  const std::string key = "OpenBLAS kernels: ";
  const size_t at = output.find(key);
  return at == std::string::npos ? "" : output.substr(at + key.size(), output.find('\n', at) - at - key.size());
}

}  // namespace

TEST(BlasKernels, CoreNamesHaveTheirClasses) {
  EXPECT_EQ(util::class_of_core("Prescott"), VectorClass::kOther);
  EXPECT_EQ(util::class_of_core("NEHALEM"), VectorClass::kOther);
  EXPECT_EQ(util::class_of_core("Sandybridge"), VectorClass::kAvx);
  EXPECT_EQ(util::class_of_core("Haswell"), VectorClass::kAvx2);
  EXPECT_EQ(util::class_of_core("zen"), VectorClass::kAvx2);
  EXPECT_EQ(util::class_of_core("SkylakeX"), VectorClass::kAvx512);
  EXPECT_EQ(util::class_of_core("Cooperlake"), VectorClass::kAvx512);
  EXPECT_EQ(util::class_of_core("SapphireRapids"), VectorClass::kAvx512);
}

// Every row of the rule: the user's variable wins; a narrower own choice is widened to the CPU's class;
// an own choice as wide as the CPU (or wider: a CPU flag the OS hides) is kept; no OpenBLAS, no choice.
TEST(BlasKernels, TheRuleWidensOnlyANarrowerOwnChoiceAndTheUserWins) {
  struct Row {
    VectorClass cpu;
    const char* own;
    const char* user;
    const char* set;
    const char* why;
  };
  const Row rows[] = {
      {VectorClass::kAvx512, "Prescott", nullptr, "SkylakeX", "chosen for this CPU; this OpenBLAS would run Prescott's"},
      {VectorClass::kAvx512, "Haswell", nullptr, "SkylakeX", "chosen for this CPU; this OpenBLAS would run Haswell's"},
      {VectorClass::kAvx512, "Zen", nullptr, "SkylakeX", "chosen for this CPU; this OpenBLAS would run Zen's"},
      {VectorClass::kAvx512, "SkylakeX", nullptr, "", "OpenBLAS's own choice for this CPU"},
      {VectorClass::kAvx512, "Cooperlake", nullptr, "", "OpenBLAS's own choice for this CPU"},
      {VectorClass::kAvx512, "Prescott", "Haswell", "", "OPENBLAS_CORETYPE from the environment"},
      {VectorClass::kAvx512, "Prescott", "Prescott", "", "OPENBLAS_CORETYPE from the environment"},
      {VectorClass::kAvx2, "Prescott", nullptr, "Haswell", "chosen for this CPU; this OpenBLAS would run Prescott's"},
      {VectorClass::kAvx2, "Sandybridge", nullptr, "Haswell", "chosen for this CPU; this OpenBLAS would run Sandybridge's"},
      {VectorClass::kAvx2, "Zen", nullptr, "", "OpenBLAS's own choice for this CPU"},
      {VectorClass::kAvx2, "SkylakeX", nullptr, "", "OpenBLAS's own choice for this CPU"},
      {VectorClass::kAvx2, "Nehalem", "Nehalem", "", "OPENBLAS_CORETYPE from the environment"},
      {VectorClass::kOther, "Nehalem", nullptr, "", "OpenBLAS's own choice for this CPU"},
      {VectorClass::kOther, "Prescott", nullptr, "", "OpenBLAS's own choice for this CPU"},
      {VectorClass::kAvx512, "", nullptr, "", ""},  // not OpenBLAS
  };
  for (const Row& r : rows) {
    const util::BlasKernelChoice c = util::choose_blas_kernels(r.cpu, r.own, r.user);
    EXPECT_EQ(c.set, r.set) << r.own << " user " << (r.user ? r.user : "unset");
    EXPECT_EQ(c.why, r.why) << r.own << " user " << (r.user ? r.user : "unset");
  }
}

// The binaries: --version and the training log name the kernels and why, through the front and when the test
// build is started directly (it executes itself again with the variable set); the user's variable wins.
TEST(BlasKernels, TheBinariesNameTheKernelsTheRuleChose) {
  const auto front = run_command("env -u OPENBLAS_CORETYPE -u LMTRAIN_BLAS_KERNELS " + std::string(LMTRAIN_BINARY) +
                                 " --version");
  ASSERT_EQ(front.exit_code, 0) << front.output;
  const std::string chosen = version_kernels(front.output);
  ASSERT_FALSE(chosen.empty()) << "no OpenBLAS kernels line (is OpenBLAS the BLAS?)\n" << front.output;
  std::cout << "[ note     ] here: OpenBLAS kernels " << chosen << std::endl;
  const VectorClass cpu = util::cpu_vector_class();
  const std::string name = chosen.substr(0, chosen.find(' '));
  if (cpu != VectorClass::kOther) {
    EXPECT_GE(util::class_of_core(name), cpu) << chosen;
  }
  const bool widened = chosen.find("(chosen for this CPU; this OpenBLAS would run ") != std::string::npos;
  EXPECT_TRUE(widened || chosen.find("(OpenBLAS's own choice for this CPU)") != std::string::npos) << chosen;

  const auto direct = run_command("env -u OPENBLAS_CORETYPE -u LMTRAIN_BLAS_KERNELS " +
                                  std::string(LMTRAIN_FAULTS_BINARY) + " --version");
  ASSERT_EQ(direct.exit_code, 0) << direct.output;
  EXPECT_EQ(version_kernels(direct.output), chosen) << direct.output;

  const auto user = run_command("env -u LMTRAIN_BLAS_KERNELS OPENBLAS_CORETYPE=Prescott " +
                                std::string(LMTRAIN_BINARY) + " --version");
  ASSERT_EQ(user.exit_code, 0) << user.output;
  EXPECT_EQ(version_kernels(user.output), "Prescott (OPENBLAS_CORETYPE from the environment)") << user.output;
}

}  // namespace lm::test
