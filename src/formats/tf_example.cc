// parse_tf_example (see dataecho/formats/tfrecord.h): protobuf parses the message, the
// features become tensors with one copy of their values.
#include <algorithm>

#include "dataecho/formats/tfrecord.h"
#include "dataecho/proto/example.pb.h"

namespace dataecho {
namespace {

[[noreturn]] void invalid(const std::string& why) {
  throw Error(ErrorCode::kDataLoss, "tf.Example", why);
}

Tensor feature_tensor(const proto::Feature& f, const std::string& key) {
  switch (f.kind_case()) {
    case proto::Feature::kBytesList: {
      const auto& v = f.bytes_list().value();
      if (v.size() == 0) return Tensor::from_bytes("");
      if (v.size() > 1) {
        invalid("feature '" + key + "' holds " + std::to_string(v.size()) +
                " byte strings; only single byte strings become tensors");
      }
      return Tensor::from_bytes(v[0]);
    }
    case proto::Feature::kInt64List: {
      const auto& v = f.int64_list().value();
      if (v.size() == 1) return Tensor::scalar<int64_t>(v[0]);
      return Tensor::from_data(DType::kInt64, {v.size()}, v.data(),
                               sizeof(int64_t) * static_cast<size_t>(v.size()));
    }
    case proto::Feature::kFloatList: {
      const auto& v = f.float_list().value();
      if (v.size() == 1) return Tensor::scalar<float>(v[0]);
      return Tensor::from_data(DType::kFloat32, {v.size()}, v.data(),
                               sizeof(float) * static_cast<size_t>(v.size()));
    }
    case proto::Feature::KIND_NOT_SET:
      break;
  }
  invalid("feature '" + key + "' has no value list (bytes_list, float_list or int64_list)");
}

}  // namespace

void parse_tf_example(const void* data, size_t size, const std::vector<TfFeature>& features,
                      Example& out) {
  if (size > static_cast<size_t>(INT32_MAX))
    invalid("invalid tf.Example: record larger than 2 GiB");
  proto::Example ex;
  if (!ex.ParseFromArray(data, static_cast<int>(size))) {
    invalid("invalid tf.Example (not a valid serialized tf.train.Example message)");
  }
  const auto& map = ex.features().feature();
  if (features.empty()) {
    std::vector<const std::string*> keys;
    keys.reserve(map.size());
    for (const auto& [k, v] : map) keys.push_back(&k);
    std::sort(keys.begin(), keys.end(), [](auto* a, auto* b) { return *a < *b; });
    // The standard image keys take the names the image functions read by default,
    // unless the record has features of those names itself.
    auto name_of = [&](const std::string& key) -> const std::string& {
      static const std::string kImage = "image", kLabel = "label";
      if (key == "image/encoded" && !map.contains(kImage)) return kImage;
      if (key == "image/class/label" && !map.contains(kLabel)) return kLabel;
      return key;
    };
    for (const auto* k : keys) out.set(name_of(*k), feature_tensor(map.at(*k), *k));
    return;
  }
  for (const auto& f : features) {
    auto it = map.find(f.key);
    if (it == map.end()) {
      std::string known;
      std::vector<std::string> keys;
      for (const auto& [k, v] : map) keys.push_back(k);
      std::sort(keys.begin(), keys.end());
      for (const auto& k : keys) known += (known.empty() ? "" : ", ") + k;
      invalid("missing feature '" + f.key +
              "' (the record has: " + (known.empty() ? "none" : known) + ")");
    }
    out.set(f.field, feature_tensor(it->second, f.key));
  }
}

}  // namespace dataecho
