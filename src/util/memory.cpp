#include "util/memory.h"

#include <malloc.h>

namespace lm::util {

void keep_freed_memory() {
  // glibc 2.36 (bookworm) takes 128 MiB; older ones refuse anything over 32 MiB and change nothing, and the
  // calls below would then fix the threshold at its 128 KiB default: ask for their largest instead.
  if (mallopt(M_MMAP_THRESHOLD, 128 * 1024 * 1024) != 1) mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024);
  mallopt(M_TRIM_THRESHOLD, 1024 * 1024 * 1024);
  mallopt(M_TOP_PAD, 64 * 1024 * 1024);
}

}  // namespace lm::util
