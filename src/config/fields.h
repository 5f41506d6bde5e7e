// The table of config keys: one row per YAML key, saying how to read its value into RunConfig (reporting
// problems instead of throwing) and how to write it back. Internal to config/: config.cpp parses, dumps
// and diffs through it. Adding a key = one row in fields.cpp + the struct field it names.
#pragma once

#include <yaml-cpp/yaml.h>

#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "config/config.h"

namespace lm::config {

/// One config key. `set` reads a YAML node into the struct or appends "key (where): expected X, got Y"
/// to `errs`; `emit` writes the current value.
struct Field {
  std::string key;   // "section.key"
  std::string help;  // one line, also printed by `lmtrain train --help-config`
  std::function<void(RunConfig&, const YAML::Node&, const std::string& where, std::vector<std::string>& errs)> set;
  std::function<void(const RunConfig&, YAML::Emitter&)> emit;
};

/// Every key, in documentation order (the order of --list-keys, dump_config and docs/config.md's table).
const std::vector<Field>& fields();

/// The row of "section.key", or nullptr.
const Field* find_field(const std::string& key);

/// Shortest decimal form of a number, for messages.
template <typename T>
std::string show(T v) {
  std::ostringstream ss;
  ss << v;
  return ss.str();
}

}  // namespace lm::config
