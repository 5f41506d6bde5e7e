// libFuzzer target: lm::fuzz::token_file_input (tests/fuzz/fuzz_entries.h). Built by scripts/fuzz.sh with clang.
#include "fuzz/fuzz_entries.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  lm::fuzz::token_file_input(data, size);
  return 0;
}
