// libFuzzer target: lm::fuzz::config_input (tests/fuzz/fuzz_entries.h). Built by scripts/fuzz.sh with clang.
#include "fuzz/fuzz_entries.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  lm::fuzz::config_input(data, size);
  return 0;
}
