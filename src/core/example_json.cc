#include "dataecho/core/example_json.h"

namespace dataecho {
namespace {

template <class T>
nlohmann::json values_of(const Tensor& t) {
  const T* p = t.data<T>();
  int64_t n = t.num_elements();
  if (t.rank() == 0) return p[0];
  nlohmann::json a = nlohmann::json::array();
  for (int64_t i = 0; i < n; ++i) a.push_back(p[i]);
  return a;
}

// Whether bytes read as text: valid UTF-8 without control characters but tab and line
// breaks (a text source's "text", a list's string column; not an image's bytes).
bool is_text(const uint8_t* p, int64_t n) {
  for (int64_t i = 0; i < n;) {
    const uint8_t c = p[i];
    if (c < 0x80) {
      if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') return false;
      if (c == 0x7f) return false;
      ++i;
      continue;
    }
    const int len = (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
    if (len == 0 || i + len > n) return false;
    const uint32_t lead = c & (0x7f >> len);
    uint32_t cp = lead;
    for (int k = 1; k < len; ++k) {
      if ((p[i + k] & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (p[i + k] & 0x3f);
    }
    // Overlong forms, surrogates and code points past U+10FFFF are not UTF-8.
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
        (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
      return false;
    i += len;
  }
  return true;
}

}  // namespace

std::optional<std::string> tensor_text(const Tensor& t) {
  if (t.dtype() != DType::kUInt8 || t.rank() != 1) return std::nullopt;
  const auto* p = t.data<uint8_t>();
  if (!is_text(p, t.num_elements())) return std::nullopt;
  return std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(t.num_elements()));
}

nlohmann::json tensor_values_json(const Tensor& t) {
  switch (t.dtype()) {
    case DType::kUInt8:
      return values_of<uint8_t>(t);
    case DType::kInt32:
      return values_of<int32_t>(t);
    case DType::kInt64:
      return values_of<int64_t>(t);
    case DType::kFloat32:
      return values_of<float>(t);
    case DType::kFloat64:
      return values_of<double>(t);
  }
  return nullptr;
}

nlohmann::ordered_json example_to_json(const Example& e, bool with_values) {
  nlohmann::ordered_json j;
  nlohmann::json ids = nlohmann::json::array(), echo = nlohmann::json::array(),
                 epoch = nlohmann::json::array();
  bool any_epoch = false;
  for (size_t i = 0; i < e.num_rows(); ++i) {
    ids.push_back(e.row(i).id);
    echo.push_back(e.row(i).echo);
    epoch.push_back(e.row(i).epoch);
    any_epoch = any_epoch || e.row(i).epoch != 0;
  }
  j["ids"] = std::move(ids);
  j["echo"] = std::move(echo);
  if (any_epoch) j["epoch"] = std::move(epoch);  // only after a repeat's first pass
  nlohmann::ordered_json fields = nlohmann::ordered_json::object();
  for (const auto& [name, t] : e.fields()) {
    nlohmann::ordered_json f;
    f["dtype"] = dtype_name(t.dtype());
    f["shape"] = t.shape();
    if (with_values) {
      if (auto text = tensor_text(t)) {
        f["text"] = *text;
      } else {
        f["values"] = tensor_values_json(t);
      }
    }
    fields[name] = std::move(f);
  }
  j["fields"] = std::move(fields);
  return j;
}

}  // namespace dataecho
