// libFuzzer target: lm::fuzz::safetensors_input (tests/fuzz/fuzz_entries.h). Built by scripts/fuzz.sh with clang.
#include "fuzz/fuzz_entries.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  lm::fuzz::safetensors_input(data, size);
  return 0;
}
