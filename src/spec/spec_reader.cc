#include "dataecho/spec/spec_reader.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

namespace dataecho {
namespace {

const nlohmann::json& empty_object() {
  static const nlohmann::json e = nlohmann::json::object();
  return e;
}

// "a", "b" or "c": choices as describe_type (schema.h) and docs/spec.md list them.
std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i)
    s += (i == 0 ? "" : i + 1 == v.size() ? " or " : ", ") + ("\"" + v[i] + "\"");
  return s;
}

// Edits between a and b, a transposition of neighbours counting as one (optimal string
// alignment).
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t sub = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + sub});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

// The closest of `known` to `name` when it is close enough to be a misspelling.
std::optional<std::string> closest(const std::string& name, const std::vector<std::string>& known) {
  const size_t most = name.size() <= 3 ? 1 : name.size() <= 6 ? 2 : 3;
  std::optional<std::string> best;
  size_t best_d = most + 1;
  for (const auto& k : known) {
    const size_t d = edit_distance(name, k);
    if (d < best_d && d > 0) {
      best_d = d;
      best = k;
    }
  }
  return best;
}

}  // namespace

std::string comma_list(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

std::string did_you_mean(const std::string& name, const std::vector<std::string>& known) {
  const std::optional<std::string> c = closest(name, known);
  return c ? "; did you mean \"" + *c + "\"?" : "";
}

std::string describe_json(const nlohmann::json& j) {
  std::string s = j.dump();
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return std::string(j.type_name()) + " " + s;
}

void throw_spec_error(const std::string& path, const std::string& message) {
  throw Error(ErrorCode::kInvalidArgument, "spec", path + ": " + message);
}

SpecObject::SpecObject(const nlohmann::json& json, std::string path)
    : json_(json), path_(std::move(path)) {
  if (!json_.is_object())
    throw_spec_error(path_, "expected an object, got " + describe_json(json_));
}

void SpecObject::declare(const std::vector<OptionDecl>& options, std::string name) {
  decls_ = &options;
  decl_name_ = std::move(name);
}

const OptionDecl* SpecObject::declared(const std::string& key) const {
  if (!decls_ || key == "op" || key == "kind") return nullptr;
  if (const OptionDecl* d = find_option(*decls_, key)) return d;
  throw Error(ErrorCode::kInternal, "spec",
              field_path(key) + ": " + decl_name_ + " reads the option \"" + key +
                  "\", which its declaration (schema.h) lacks");
}

void SpecObject::fail(const std::string& key, const std::string& expected,
                      const nlohmann::json& got) const {
  throw_spec_error(field_path(key), "expected " + expected + ", got " + describe_json(got));
}

const nlohmann::json* SpecObject::raw(const std::string& key) {
  declared(key);
  used_.insert(key);
  auto it = json_.find(key);
  return it == json_.end() ? nullptr : &*it;
}

int64_t SpecObject::get_int(const std::string& key, std::optional<int64_t> fallback, int64_t min,
                            int64_t max) {
  if (const OptionDecl* d = declared(key)) {
    if (!fallback && d->fallback.is_number_integer()) fallback = d->fallback.get<int64_t>();
    if (min == INT64_MIN && d->min) min = static_cast<int64_t>(*d->min);
    if (max == INT64_MAX && d->max) max = static_cast<int64_t>(*d->max);
  }
  const nlohmann::json* j = raw(key);
  const std::string expected =
      "an integer" + bounds_text(min == INT64_MIN ? std::nullopt : std::optional<int64_t>(min),
                                 max == INT64_MAX ? std::nullopt : std::optional<int64_t>(max));
  if (!j) {
    if (fallback) return *fallback;
    missing(key, expected);
  }
  int64_t v;
  if (j->is_number_integer()) {
    v = j->get<int64_t>();
  } else if (j->is_number_float() && std::floor(j->get<double>()) == j->get<double>() &&
             std::abs(j->get<double>()) < 9e18) {
    v = static_cast<int64_t>(j->get<double>());
  } else {
    fail(key, expected, *j);
  }
  if (v < min || v > max) fail(key, expected, *j);
  return v;
}

double SpecObject::get_number(const std::string& key, std::optional<double> fallback, double min,
                              double max) {
  if (const OptionDecl* d = declared(key)) {
    if (!fallback && d->fallback.is_number()) fallback = d->fallback.get<double>();
    if (min <= -1e308 && d->min) min = *d->min;
    if (max >= 1e308 && d->max) max = *d->max;
  }
  const nlohmann::json* j = raw(key);
  const std::string expected =
      "a number" + bounds_text(min > -1e308 ? std::optional<double>(min) : std::nullopt,
                               max < 1e308 ? std::optional<double>(max) : std::nullopt);
  if (!j) {
    if (fallback) return *fallback;
    missing(key, expected);
  }
  if (!j->is_number()) fail(key, expected, *j);
  double v = j->get<double>();
  if (!std::isfinite(v) || v < min || v > max) fail(key, expected, *j);
  return v;
}

bool SpecObject::get_bool(const std::string& key, std::optional<bool> fallback) {
  if (const OptionDecl* d = declared(key); d && !fallback && d->fallback.is_boolean())
    fallback = d->fallback.get<bool>();
  const nlohmann::json* j = raw(key);
  if (!j) {
    if (fallback) return *fallback;
    missing(key, "true or false");
  }
  if (!j->is_boolean()) fail(key, "true or false", *j);
  return j->get<bool>();
}

std::string SpecObject::get_string(const std::string& key, std::optional<std::string> fallback,
                                   const std::vector<std::string>& given_allowed) {
  const OptionDecl* d = declared(key);
  if (d && !fallback && d->fallback.is_string()) fallback = d->fallback.get<std::string>();
  const std::vector<std::string>& allowed = given_allowed.empty() && d ? d->choices : given_allowed;
  const nlohmann::json* j = raw(key);
  std::string expected = allowed.empty() ? "a string" : "one of " + join(allowed);
  if (!j) {
    if (fallback) return *fallback;
    missing(key, expected);
  }
  if (!j->is_string()) fail(key, expected, *j);
  std::string v = j->get<std::string>();
  if (!allowed.empty()) {
    bool ok = false;
    for (const auto& a : allowed) ok |= a == v;
    if (!ok) fail(key, expected, *j);
  }
  return v;
}

std::vector<std::string> SpecObject::get_strings(const std::string& key) {
  const nlohmann::json* j = raw(key);
  if (!j) missing(key, "a string or a list of strings");
  std::vector<std::string> out;
  if (j->is_string()) {
    out.push_back(j->get<std::string>());
  } else if (j->is_array() && !j->empty()) {
    for (size_t i = 0; i < j->size(); ++i) {
      if (!(*j)[i].is_string())
        throw_spec_error(field_path(key) + "[" + std::to_string(i) + "]",
                         "expected a string, got " + describe_json((*j)[i]));
      out.push_back((*j)[i].get<std::string>());
    }
  } else {
    fail(key, "a string or a non-empty list of strings", *j);
  }
  return out;
}

SpecObject SpecObject::get_object(const std::string& key, bool required) {
  const OptionDecl* d = declared(key);
  const nlohmann::json* j = raw(key);
  if (!j && required) missing(key, "an object");
  SpecObject o(j ? *j : empty_object(), field_path(key));
  if (d && d->type == OptionType::kObject) o.declare(d->fields, decl_name_ + "." + key);
  return o;
}

void SpecObject::missing(const std::string& key, const std::string& expected) const {
  std::vector<std::string> unread;
  for (auto it = json_.begin(); it != json_.end(); ++it)
    if (!used_.count(it.key()) && !asked_.count(it.key())) unread.push_back(it.key());
  std::string hint;
  for (const auto& u : unread)
    if (closest(u, {key}))
      hint = " (this object has \"" + u + "\": a misspelling of \"" + key + "\"?)";
  throw_spec_error(field_path(key), "missing; expected " + expected + hint);
}

void SpecObject::finish() const {
  std::set<std::string> known_set = used_;
  known_set.insert(asked_.begin(), asked_.end());
  if (decls_)
    for (const OptionDecl& d : *decls_) known_set.insert(d.name);
  const std::vector<std::string> known(known_set.begin(), known_set.end());
  for (auto it = json_.begin(); it != json_.end(); ++it) {
    if (used_.count(it.key())) continue;
    if (decls_ && find_option(*decls_, it.key()))
      throw_spec_error(field_path(it.key()),
                       "does not apply here, with the other options as given (docs/spec.md, " +
                           decl_name_ + ")");
    throw_spec_error(field_path(it.key()), "unknown field" + did_you_mean(it.key(), known) +
                                               " (known here: " + comma_list(known) + ")");
  }
}

}  // namespace dataecho
