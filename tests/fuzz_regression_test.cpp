// Replays every saved input of tests/fuzz/regressions/<target>/ through the fuzz target's entry
// (tests/fuzz/fuzz_entries.h) in the normal build: a crash that fuzzing once found, or a hole fixed by hand,
// stays fixed. Each entry must return normally (bad bytes end in an lm::Error, which the entry expects).
#include <gtest/gtest.h>

#include "fuzz/fuzz_entries.h"
#include "test_util.h"

namespace lm::test {

namespace {

size_t replay(const std::string& target, void (*entry)(const uint8_t*, size_t)) {
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(fs::path(LMTRAIN_SOURCE_DIR) / "tests" / "fuzz" / "regressions" / target)) {
    if (e.path().filename() == "README.md") continue;
    const std::string bytes = slurp(e.path());
    EXPECT_NO_THROW(entry(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size())) << e.path();
    ++n;
  }
  return n;
}

}  // namespace

TEST(FuzzRegressions, ConfigInputsEndInConfigErrors) { EXPECT_GT(replay("config", fuzz::config_input), 0u); }
TEST(FuzzRegressions, TokenFileInputsEndInDataErrors) { EXPECT_GT(replay("token_file", fuzz::token_file_input), 0u); }
TEST(FuzzRegressions, SafetensorsInputsEndInCheckpointErrors) {
  EXPECT_GT(replay("safetensors", fuzz::safetensors_input), 0u);
}
TEST(FuzzRegressions, CheckpointInputsEndInCheckpointErrors) {
  EXPECT_GT(replay("checkpoint", fuzz::checkpoint_input), 0u);
}

}  // namespace lm::test
