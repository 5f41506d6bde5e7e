#include "util/faults.h"

namespace lm::util {
namespace {

std::unique_ptr<FaultHooks>& installed() {
  static std::unique_ptr<FaultHooks> hooks = std::make_unique<FaultHooks>();
  return hooks;
}

}  // namespace

FaultHooks& fault_hooks() { return *installed(); }

void install_fault_hooks(std::unique_ptr<FaultHooks> hooks) {
  installed() = hooks ? std::move(hooks) : std::make_unique<FaultHooks>();
}

}  // namespace lm::util
