// SpecObject: typed, validated access to one JSON object of a pipeline spec. Every
// error names the JSON path of the field and what was expected:
//   spec: $.stages[2].size: expected an integer >= 1, got -3
// finish() refuses fields nobody asked for (a typo is an error, not a silent default).
// With the options declared (declare(), schema.h), a getter given no default or bounds of
// its own takes the declared ones, reading an undeclared option is a bug (kInternal), and
// finish() names the declared options.
// Not thread-safe; used while a pipeline is being built.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dataecho/core/error.h"
#include "dataecho/spec/schema.h"

namespace dataecho {

[[noreturn]] void throw_spec_error(const std::string& path, const std::string& message);
// What a spec error says it got: the JSON type and up to 60 characters of the value.
std::string describe_json(const nlohmann::json& j);

class SpecObject {
 public:
  // `json` must outlive this object. Throws if it is not an object.
  SpecObject(const nlohmann::json& json, std::string path);

  // The options of `name` (an op, a source kind, a function): getters default to them.
  void declare(const std::vector<OptionDecl>& options, std::string name);
  void declare(const OpSchema& schema) { declare(schema.options, schema.name); }

  // The declaration of `key`, null without declarations (kInternal for an undeclared key).
  const OptionDecl* declaration(const std::string& key) const { return declared(key); }

  const std::string& path() const { return path_; }
  std::string field_path(const std::string& key) const { return path_ + "." + key; }
  bool has(const std::string& key) const {
    declared(key);
    asked_.insert(key);
    return json_.contains(key);
  }
  const nlohmann::json* raw(const std::string& key);  // marks the field used; null if absent

  int64_t get_int(const std::string& key, std::optional<int64_t> fallback = std::nullopt,
                  int64_t min = INT64_MIN, int64_t max = INT64_MAX);
  double get_number(const std::string& key, std::optional<double> fallback = std::nullopt,
                    double min = -1e308, double max = 1e308);
  bool get_bool(const std::string& key, std::optional<bool> fallback = std::nullopt);
  std::string get_string(const std::string& key, std::optional<std::string> fallback = std::nullopt,
                         const std::vector<std::string>& allowed = {});
  // A string or a list of strings.
  std::vector<std::string> get_strings(const std::string& key);
  // A nested object (or an empty one when absent and optional); a declared kObject's
  // fields are declared on it.
  SpecObject get_object(const std::string& key, bool required = false);

  // Throws for the first field not read by any getter above, naming the fields known
  // here (every field a getter, raw() or has() asked for) and the closest of them.
  void finish() const;

 private:
  // The declaration of `key` (null without declarations); throws kInternal for a key not
  // declared.
  const OptionDecl* declared(const std::string& key) const;
  [[noreturn]] void fail(const std::string& key, const std::string& expected,
                         const nlohmann::json& got) const;
  // "missing; expected ...", naming a field of the object that looks like a misspelling
  // of `key`.
  [[noreturn]] void missing(const std::string& key, const std::string& expected) const;
  const nlohmann::json& json_;
  std::string path_;
  std::set<std::string> used_;
  mutable std::set<std::string> asked_;  // has() too: optional fields read only when there
  const std::vector<OptionDecl>* decls_ = nullptr;
  std::string decl_name_;
};

// "; did you mean \"x\"?" when `name` looks like a misspelling of one of `known` (a few
// edits away, a transposition counting as one), else "".
std::string did_you_mean(const std::string& name, const std::vector<std::string>& known);
// "a, b, c".
std::string comma_list(const std::vector<std::string>& names);

}  // namespace dataecho
