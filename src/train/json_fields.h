// A struct's JSON by one table of its fields: each entry says the field's name (and the
// object it sits in), its type, default and bounds as the reading takes them (an
// OptionDecl, schema.h), how its value is read and written (a member, or accessors), and
// when it is written. write_fields and read_fields walk the same table, so that what is
// written is what is read. TrainConfig (train_config.cc), TrainResult and EvalRecord
// (train_result.cc) are written and read by theirs. Private to the trainer (src/train).
// Thread-safety: the tables are constants; reading and writing are plain functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "dataecho/core/error.h"
#include "dataecho/spec/schema.h"
#include "dataecho/spec/spec_reader.h"

namespace dataecho::train::json_fields {

template <class S>
struct Field {
  const char* object;  // "" for a field of the top object, else the nested object's name
  OptionDecl decl;     // name, type, default, bounds, choices; `written`: kWhenGiven or not
  nlohmann::json (*write)(const S&) = nullptr;                 // null: read only
  void (*read)(SpecObject&, const OptionDecl&, S&) = nullptr;  // null: written only (derived)
  bool (*when)(const S&) = nullptr;  // written only where this holds (null: always)
};

template <class T>
struct is_optional : std::false_type {};
template <class T>
struct is_optional<std::optional<T>> : std::true_type {};

// The value of a field, an optional one as null when unset.
template <class T>
nlohmann::json value_json(const T& v) {
  if constexpr (is_optional<T>::value) {
    return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
  } else {
    return nlohmann::json(v);
  }
}

// A list of numbers, or one number as a list of one.
inline std::vector<double> number_list(SpecObject& o, const std::string& key) {
  const nlohmann::json* j = o.raw(key);
  std::vector<double> out;
  if (!j) return out;
  if (j->is_number()) return {j->get<double>()};
  if (!j->is_array()) throw_spec_error(o.field_path(key), "expected a number or a list of numbers");
  for (const auto& v : *j) {
    if (!v.is_number()) throw_spec_error(o.field_path(key), "expected a list of numbers");
    out.push_back(v.get<double>());
  }
  return out;
}

// Reads `key` into `v` by the declaration: its default when absent, its bounds and
// choices checked by SpecObject's getters (their errors name the JSON path). An optional
// is left unset when absent, and when null unless it is written only when given
// (Written::kWhenGiven: it is never written as null).
template <class T>
void read_value(SpecObject& o, const OptionDecl& d, T& v) {
  const std::string& k = d.name;
  if constexpr (is_optional<T>::value) {
    if (!o.has(k)) return;
    const nlohmann::json* j = o.raw(k);
    if (j->is_null() && d.written != Written::kWhenGiven) return;
    typename T::value_type x{};
    read_value(o, OptionDecl{.name = k}, x);
    v = x;
  } else if constexpr (std::is_same_v<T, std::string>) {
    v = d.fallback.is_string() ? o.get_string(k, d.fallback.get<std::string>(), d.choices)
                               : o.get_string(k, std::nullopt, d.choices);
  } else if constexpr (std::is_same_v<T, bool>) {
    v = d.fallback.is_boolean() ? o.get_bool(k, d.fallback.get<bool>()) : o.get_bool(k);
  } else if constexpr (std::is_integral_v<T>) {
    const std::optional<int64_t> fallback = d.fallback.is_number_integer()
                                                ? std::optional<int64_t>(d.fallback.get<int64_t>())
                                                : std::nullopt;
    v = static_cast<T>(o.get_int(k, fallback, d.min ? static_cast<int64_t>(*d.min) : INT64_MIN));
  } else if constexpr (std::is_same_v<T, double>) {
    v = d.fallback.is_number() ? o.get_number(k, d.fallback.get<double>()) : o.get_number(k);
  } else if constexpr (std::is_same_v<T, std::vector<double>>) {
    v = number_list(o, k);
  } else {
    static_assert(std::is_same_v<T, nlohmann::json>, "a field of an unsupported type");
    const nlohmann::json* j = o.raw(k);
    v = j ? *j : nlohmann::json(nullptr);
  }
}

// A field of the top object or of a nested one: `M` is a pointer to the member, `Outer`
// (if any) to the nested struct that holds it.
template <class S, auto M, auto Outer = nullptr>
struct MemberOf {
  static auto& get(S& s) {
    if constexpr (std::is_null_pointer_v<decltype(Outer)>) {
      return s.*M;
    } else {
      return (s.*Outer).*M;
    }
  }
  static const auto& get(const S& s) { return get(const_cast<S&>(s)); }
  static nlohmann::json write(const S& s) { return value_json(get(s)); }
  static void read(SpecObject& o, const OptionDecl& d, S& s) { read_value(o, d, get(s)); }
};

// The option type of a member of type T.
template <class T>
constexpr OptionType option_type() {
  if constexpr (is_optional<T>::value) {
    return option_type<typename T::value_type>();
  } else if constexpr (std::is_same_v<T, std::string>) {
    return OptionType::kString;
  } else if constexpr (std::is_same_v<T, bool>) {
    return OptionType::kBool;
  } else if constexpr (std::is_integral_v<T>) {
    return OptionType::kInt;
  } else if constexpr (std::is_floating_point_v<T>) {
    return OptionType::kNumber;
  } else {
    return OptionType::kJson;
  }
}

// The entry of a member: `decl` without its type, which is the member's, and (unless
// given, or the field is required) without its default, which is the member's in S{}.
template <class S, auto M, auto Outer = nullptr>
Field<S> member(const char* object, OptionDecl decl, bool (*when)(const S&) = nullptr) {
  using Access = MemberOf<S, M, Outer>;
  decl.type = option_type<std::remove_cvref_t<decltype(Access::get(std::declval<S&>()))>>();
  if (decl.fallback.is_null() && !decl.required) {
    const S defaults{};
    decl.fallback = Access::write(defaults);
  }
  return {object, std::move(decl), &Access::write, &Access::read, when};
}

// A field is written where its `when` holds (null: always), and, if kWhenGiven, only
// when it is not at its default (an unset optional, an empty list, 0).
template <class S>
nlohmann::json write_fields(const S& s, const std::vector<Field<S>>& fields) {
  nlohmann::json j = nlohmann::json::object();
  for (const Field<S>& f : fields) {
    if (!f.write || (f.when && !f.when(s))) continue;
    nlohmann::json v = f.write(s);
    if (f.decl.written == Written::kWhenGiven && v == f.decl.fallback) continue;
    if (*f.object)
      j[f.object][f.decl.name] = std::move(v);
    else
      j[f.decl.name] = std::move(v);
  }
  return j;
}

// Reads the fields in the table's order; a nested object's fields (consecutive entries)
// from that object, which refuses fields it does not know (SpecObject::finish). The top
// object is the caller's to finish.
template <class S>
void read_fields(SpecObject& top, const std::vector<Field<S>>& fields, S& s) {
  std::optional<SpecObject> nested;
  std::string nested_name;
  for (const Field<S>& f : fields) {
    if (nested && nested_name != f.object) {
      nested->finish();
      nested.reset();
    }
    if (*f.object && !nested) {
      nested_name = f.object;
      nested.emplace(top.get_object(nested_name));
    }
    if (f.read) f.read(nested ? *nested : top, f.decl, s);
  }
  if (nested) nested->finish();
}

// A record of S read from `j` by its table, leniently: fields the table does not know
// are let be (a record written by another version). Errors name `what` and the field:
// "train result: $.steps: expected an integer, got string \"many\"".
template <class S>
S read_object(const nlohmann::json& j, const std::vector<Field<S>>& fields, const char* what) {
  S s;
  try {
    SpecObject o(j, "$");
    read_fields(o, fields, s);
  } catch (const Error& e) {
    if (e.stage() != "spec") throw;
    throw Error(e.code(), what, e.message(), e.input());
  }
  return s;
}

}  // namespace dataecho::train::json_fields
