// The declaration of an operator's options: each option's name, type, default, bounds and
// one line of documentation, written once beside the operator's spec builder and
// registered with it (registry.h). From it come:
//   - the reading of the spec: SpecObject's getters (spec_reader.h) take the declared
//     default and bounds, so a builder names an option and nothing more, and a field
//     that is not declared is refused with the list of the declared ones;
//   - the stages the Python package makes: PipelineDef::declared_stage writes an op's
//     options as given, by each declaration's `written` policy;
//   - `dataecho spec` (every declaration as JSON), from which scripts/gen_spec.py writes
//     docs/spec.md, the Python package's stage methods and source functions
//     (python/dataecho/_declared.py) and option tables (_spec_options.py), and the C++
//     fluent builder's option structs (spec/stage_options.h) with the function that
//     hands their fields to declared_stage: all committed, and checked for staleness by
//     the tests.
// Why a table in C++ rather than a schema file turned into code: the builders read their
// options through it at run time (defaults and bounds have one home), an op registered by
// a user declares its options the same way without a code generator, and building the
// engine needs nothing but a compiler.
// Thread-safety: plain values; the registry's are read-only once registered.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dataecho {

// What a JSON option holds.
enum class OptionType {
  kInt,        // an integer, within [min, max]
  kNumber,     // a finite number, within [min, max]
  kBool,       // true or false
  kString,     // a string; one of `choices` when given
  kStrings,    // a string or a non-empty list of strings
  kInts,       // a list of integers, each within [min, max]
  kIntOrAuto,  // an integer within [min, max], or "auto" (set by the tuner)
  kFactor,     // a number within [min, max], or one of `choices` (echo's "factor")
  kObject,     // an object of the declared `fields`
  kJson,       // a value of the shape `shape` describes, checked by the builder
};

// Bounds of sizes: a spec beyond them is refused before anything runs (not after an
// allocation fails).
inline constexpr int64_t kMaxBatchSize = int64_t{1} << 24;       // elements in one batch
inline constexpr int64_t kMaxSequenceLength = int64_t{1} << 24;  // tokens in one sequence
inline constexpr int64_t kMaxTokenBudget = int64_t{1} << 30;     // tokens in one batch
inline constexpr int64_t kMaxBufferElements = int64_t{1} << 30;  // elements a buffer holds
inline constexpr int64_t kMaxBytes = int64_t{1} << 50;           // bytes a cache or buffer holds

// When the C++ and Python builders write an option into a stage's JSON (so that a
// definition made in code has the spec a person would write, and its fingerprint does not
// depend on how it was made): kDerived is kAlways for a required option, kUnlessDefault
// for a bool with a default, kWhenGiven otherwise.
enum class Written { kDerived, kAlways, kWhenGiven, kUnlessDefault };

struct OptionDecl {
  std::string name;
  OptionType type = OptionType::kInt;
  bool required = false;
  nlohmann::json fallback = nullptr;  // the default (null: none, or `default_text`)
  std::optional<double> min = std::nullopt;
  std::optional<double> max = std::nullopt;
  std::string default_text = "";  // a default that is not a constant ("the node's seed")
  std::vector<std::string> choices = {};
  std::string shape = "";               // kJson: what the value looks like
  std::vector<OptionDecl> fields = {};  // kObject: its options
  Written written = Written::kDerived;
  std::string doc = "";  // one line
};

// A source kind, stage op, map function or filter predicate and its options.
struct OpSchema {
  std::string name;
  std::string doc;  // what it does, in a sentence or two
  std::vector<OptionDecl> options;
  const OptionDecl* find(const std::string& option) const;
};

// A stage's own "seed", an integer >= 0 (default: the node's, from the pipeline's seed).
OptionDecl seed_option(const std::string& what);

// Throws a spec error at `path` when `v` is not of the declared option's type (or not one
// of its choices); bounds are the getters' to check.
void check_type(const OptionDecl& d, const nlohmann::json& v, const std::string& path);

// Whether the builders leave the option out when it is given at its default (Written).
bool omitted_at_default(const OptionDecl& d);

// "size" and "drop_remainder", as batch and padded_batch take them.
std::vector<OptionDecl> batch_options();

const OptionDecl* find_option(const std::vector<OptionDecl>& options, const std::string& name);

// " in [1, 16777216]", " >= 0", " <= 9" or "": what follows "an integer" or "a number"
// in the reference and in the getters' errors (bounds written as a person writes them:
// 16777216, 0.5, 1e-06).
std::string bounds_text(std::optional<double> min, std::optional<double> max);
std::string bounds_text(std::optional<int64_t> min, std::optional<int64_t> max);  // exact
// "an integer in [1, 16777216]", "one of \"fail\", \"skip\"", ...: what the reference and
// the errors say an option takes.
std::string describe_type(const OptionDecl& d);
// The declaration as JSON (docs/spec.md's generator reads it).
nlohmann::json to_json(const OptionDecl& d);
nlohmann::json to_json(const OpSchema& s);

}  // namespace dataecho
