#include "util/memory.h"

#include <malloc.h>

namespace lm::util {

void keep_freed_memory() {
  mallopt(M_MMAP_THRESHOLD, 128 * 1024 * 1024);
  mallopt(M_TRIM_THRESHOLD, 1024 * 1024 * 1024);
  mallopt(M_TOP_PAD, 64 * 1024 * 1024);
}

}  // namespace lm::util
