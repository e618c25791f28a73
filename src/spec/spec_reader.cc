#include "dataecho/spec/spec_reader.h"

#include <cmath>

namespace dataecho {
namespace {

const nlohmann::json& empty_object() {
  static const nlohmann::json e = nlohmann::json::object();
  return e;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + ("\"" + x + "\"");
  return s;
}

}  // namespace

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

void SpecObject::fail(const std::string& key, const std::string& expected,
                      const nlohmann::json& got) const {
  throw_spec_error(field_path(key), "expected " + expected + ", got " + describe_json(got));
}

const nlohmann::json* SpecObject::raw(const std::string& key) {
  used_.insert(key);
  auto it = json_.find(key);
  return it == json_.end() ? nullptr : &*it;
}

int64_t SpecObject::get_int(const std::string& key, std::optional<int64_t> fallback, int64_t min,
                            int64_t max) {
  const nlohmann::json* j = raw(key);
  std::string expected = "an integer";
  if (min != INT64_MIN && max != INT64_MAX)
    expected += " in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
  else if (min != INT64_MIN)
    expected += " >= " + std::to_string(min);
  if (!j) {
    if (fallback) return *fallback;
    throw_spec_error(field_path(key), "missing; expected " + expected);
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
  const nlohmann::json* j = raw(key);
  std::string expected = "a number";
  if (min > -1e308 && max < 1e308)
    expected += " in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
  else if (min > -1e308)
    expected += " >= " + std::to_string(min);
  if (!j) {
    if (fallback) return *fallback;
    throw_spec_error(field_path(key), "missing; expected " + expected);
  }
  if (!j->is_number()) fail(key, expected, *j);
  double v = j->get<double>();
  if (!std::isfinite(v) || v < min || v > max) fail(key, expected, *j);
  return v;
}

bool SpecObject::get_bool(const std::string& key, std::optional<bool> fallback) {
  const nlohmann::json* j = raw(key);
  if (!j) {
    if (fallback) return *fallback;
    throw_spec_error(field_path(key), "missing; expected true or false");
  }
  if (!j->is_boolean()) fail(key, "true or false", *j);
  return j->get<bool>();
}

std::string SpecObject::get_string(const std::string& key, std::optional<std::string> fallback,
                                   const std::vector<std::string>& allowed) {
  const nlohmann::json* j = raw(key);
  std::string expected = allowed.empty() ? "a string" : "one of " + join(allowed);
  if (!j) {
    if (fallback) return *fallback;
    throw_spec_error(field_path(key), "missing; expected " + expected);
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
  if (!j) throw_spec_error(field_path(key), "missing; expected a string or a list of strings");
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
  const nlohmann::json* j = raw(key);
  if (!j) {
    if (required) throw_spec_error(field_path(key), "missing; expected an object");
    return SpecObject(empty_object(), field_path(key));
  }
  return SpecObject(*j, field_path(key));
}

void SpecObject::finish() const {
  for (auto it = json_.begin(); it != json_.end(); ++it) {
    if (!used_.count(it.key())) {
      std::string known;
      for (const auto& u : used_) known += (known.empty() ? "" : ", ") + u;
      throw_spec_error(field_path(it.key()), "unknown field (known here: " + known + ")");
    }
  }
}

}  // namespace dataecho
