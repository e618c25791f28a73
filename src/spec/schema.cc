#include "dataecho/spec/schema.h"

#include <algorithm>
#include <cmath>

#include "dataecho/spec/spec_reader.h"

namespace dataecho {
namespace {

// A bound as a person writes it: 16777216, 0.5, 1e-06.
std::string bound(double v) {
  if (v == std::floor(v) && std::abs(v) < 9e15) return std::to_string(static_cast<int64_t>(v));
  return nlohmann::json(v).dump();
}
std::string bound(int64_t v) { return std::to_string(v); }

template <class T>
std::string bounds_of(std::optional<T> min, std::optional<T> max) {
  if (min && max) return " in [" + bound(*min) + ", " + bound(*max) + "]";
  if (min) return " >= " + bound(*min);
  if (max) return " <= " + bound(*max);
  return "";
}

std::string quoted(const std::vector<std::string>& names) {
  std::string s;
  for (size_t i = 0; i < names.size(); ++i)
    s += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + ("\"" + names[i] + "\"");
  return s;
}

const char* type_name(OptionType t) {
  switch (t) {
    case OptionType::kInt:
      return "int";
    case OptionType::kNumber:
      return "number";
    case OptionType::kBool:
      return "bool";
    case OptionType::kString:
      return "string";
    case OptionType::kStrings:
      return "strings";
    case OptionType::kInts:
      return "ints";
    case OptionType::kIntOrAuto:
      return "int_or_auto";
    case OptionType::kFactor:
      return "factor";
    case OptionType::kObject:
      return "object";
    case OptionType::kJson:
      return "json";
  }
  return "json";
}

}  // namespace

std::string bounds_text(std::optional<double> min, std::optional<double> max) {
  return bounds_of(min, max);
}
std::string bounds_text(std::optional<int64_t> min, std::optional<int64_t> max) {
  return bounds_of(min, max);
}

const OptionDecl* find_option(const std::vector<OptionDecl>& options, const std::string& name) {
  for (const OptionDecl& d : options)
    if (d.name == name) return &d;
  return nullptr;
}

const OptionDecl* OpSchema::find(const std::string& option) const {
  return find_option(options, option);
}

OptionDecl seed_option(const std::string& what) {
  return {.name = "seed",
          .min = 0,
          .default_text = "derived from the pipeline's seed",
          .doc = "the seed of " + what + " (the same in every epoch when given)"};
}

// Whether `v` has the declared option's type (and is one of its choices): the check a
// declared stage makes when it is made; bounds wait for the build.
void check_type(const OptionDecl& d, const nlohmann::json& v, const std::string& path) {
  auto chosen = [&] {
    return v.is_string() &&
           std::find(d.choices.begin(), d.choices.end(), v.get<std::string>()) != d.choices.end();
  };
  bool ok = true;
  switch (d.type) {
    case OptionType::kInt:
      ok = v.is_number_integer();
      break;
    case OptionType::kNumber:
      ok = v.is_number();
      break;
    case OptionType::kBool:
      ok = v.is_boolean();
      break;
    case OptionType::kString:
      ok = v.is_string() && (d.choices.empty() || chosen());
      break;
    case OptionType::kStrings:
      ok = v.is_string() || v.is_array();
      break;
    case OptionType::kInts:
      ok = v.is_array();
      break;
    case OptionType::kIntOrAuto:
      ok = v.is_number_integer() || v == "auto";
      break;
    case OptionType::kFactor:
      ok = v.is_number() || chosen();
      break;
    case OptionType::kObject:
      ok = v.is_object();
      break;
    case OptionType::kJson:
      break;
  }
  if (!ok) throw_spec_error(path, "expected " + describe_type(d) + ", got " + describe_json(v));
}

bool omitted_at_default(const OptionDecl& d) {
  switch (d.written) {
    case Written::kAlways:
    case Written::kWhenGiven:
      return false;
    case Written::kUnlessDefault:
      return true;
    case Written::kDerived:
      return !d.required && d.type == OptionType::kBool && !d.fallback.is_null();
  }
  return false;
}

// How the builders write the option (Written, kDerived resolved), for `dataecho spec`.
static const char* written_text(const OptionDecl& d) {
  if (omitted_at_default(d)) return "unless_default";
  if (d.written == Written::kAlways || (d.written == Written::kDerived && d.required))
    return "always";
  return "when_given";
}

std::vector<OptionDecl> batch_options() {
  return {{.name = "size",
           .required = true,
           .min = 1,
           .max = kMaxBatchSize,
           .doc = "elements per batch"},
          {.name = "drop_remainder",
           .type = OptionType::kBool,
           .fallback = false,
           .doc = "drop a last, smaller batch"}};
}

std::string describe_type(const OptionDecl& d) {
  switch (d.type) {
    case OptionType::kInt:
      return "an integer" + bounds_text(d.min, d.max);
    case OptionType::kNumber:
      return "a number" + bounds_text(d.min, d.max);
    case OptionType::kBool:
      return "true or false";
    case OptionType::kString:
      return d.choices.empty() ? "a string" : "one of " + quoted(d.choices);
    case OptionType::kStrings:
      return "a string or a list of strings";
    case OptionType::kInts:
      return "a list of integers" + bounds_text(d.min, d.max);
    case OptionType::kIntOrAuto:
      return "an integer" + bounds_text(d.min, d.max) + " or \"auto\"";
    case OptionType::kFactor:
      return "a number" + bounds_text(d.min, d.max) + ", " + quoted(d.choices);
    case OptionType::kObject:
      return "an object";
    case OptionType::kJson:
      return d.shape;
  }
  return d.shape;
}

nlohmann::json to_json(const OptionDecl& d) {
  nlohmann::json j = {
      {"name", d.name},         {"type", type_name(d.type)},  {"takes", describe_type(d)},
      {"required", d.required}, {"written", written_text(d)}, {"doc", d.doc}};
  if (!d.fallback.is_null()) j["default"] = d.fallback;
  if (!d.default_text.empty()) j["default_text"] = d.default_text;
  if (d.min) j["min"] = *d.min;
  if (d.max) j["max"] = *d.max;
  if (!d.choices.empty()) j["choices"] = d.choices;
  if (!d.fields.empty()) {
    j["fields"] = nlohmann::json::array();
    for (const OptionDecl& f : d.fields) j["fields"].push_back(to_json(f));
  }
  return j;
}

nlohmann::json to_json(const OpSchema& s) {
  nlohmann::json j = {{"name", s.name}, {"doc", s.doc}, {"options", nlohmann::json::array()}};
  for (const OptionDecl& d : s.options) j["options"].push_back(to_json(d));
  return j;
}

}  // namespace dataecho
