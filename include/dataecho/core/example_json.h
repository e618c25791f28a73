// The JSON view of an element that `dataecho pipe` prints, one line per element:
//   {"ids": [...], "echo": [...], "fields": {"value": {"dtype": "int64", "shape": []}}}
// `ids` and `echo` have one entry per row. With values, each field also has "values":
// its elements flattened in row-major order (a bare number for a scalar), or, for a
// uint8 vector that reads as text (tensor_text), "text": the string.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "dataecho/core/example.h"

namespace dataecho {

nlohmann::json tensor_values_json(const Tensor& t);
// A uint8 vector's bytes as a string when they are valid UTF-8 without control
// characters but tab and line breaks; nullopt otherwise.
std::optional<std::string> tensor_text(const Tensor& t);
nlohmann::ordered_json example_to_json(const Example& e, bool with_values);

}  // namespace dataecho
