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

}  // namespace

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
    if (with_values) f["values"] = tensor_values_json(t);
    fields[name] = std::move(f);
  }
  j["fields"] = std::move(fields);
  return j;
}

}  // namespace dataecho
