#include "dataecho/train/input.h"

#include "dataecho/core/error.h"

namespace dataecho::train {

std::string InputSignature::describe() const {
  if (tokens) {
    return std::string(dtype_name(dtype)) + " " + shape_to_string(row_shape) + " token blocks" +
           (document ? " with documents" : "");
  }
  std::string layout = dtype == DType::kUInt8 ? (row_shape.size() == 3 ? "HWC" : "HW")
                                              : (row_shape.size() == 3 ? "CHW" : "HW");
  return std::string(dtype_name(dtype)) + " " + shape_to_string(row_shape) + " (" + layout + ": " +
         std::to_string(channels) + "x" + std::to_string(height) + "x" + std::to_string(width) +
         ")";
}

InputSignature inspect_batch(const Example& batch, const InputOptions& input,
                             const std::string& what) {
  auto fail = [&](const std::string& message) {
    throw Error(ErrorCode::kInvalidArgument, "train", what + ": " + message);
  };
  auto field_names = [&] {
    std::string s;
    for (const auto& [name, t] : batch.fields()) s += (s.empty() ? "" : ", ") + name;
    return s.empty() ? std::string("none") : s;
  };
  if (!batch.is_batch()) {
    fail("elements are single examples, not batches: end the spec with a \"batch\" stage");
  }
  const Tensor* image = batch.find(input.image_field);
  if (!image) {
    fail("batches have no image field \"" + input.image_field + "\" (fields: " + field_names() +
         "); set input.image_field or fix the spec");
  }
  const Tensor* label = batch.find(input.label_field);
  if (!label) {
    fail("batches have no label field \"" + input.label_field + "\" (fields: " + field_names() +
         "); set input.label_field or fix the spec");
  }
  InputSignature s;
  s.dtype = image->dtype();
  const Shape& shape = image->shape();
  if (shape.empty()) fail("field \"" + input.image_field + "\" has no batch dimension");
  s.row_shape.assign(shape.begin() + 1, shape.end());
  std::string got = std::string(dtype_name(s.dtype)) + " " + shape_to_string(s.row_shape);
  if (s.dtype != DType::kUInt8 && s.dtype != DType::kFloat32) {
    fail("field \"" + input.image_field + "\" is " + got +
         "; the model takes uint8 images [H,W,C] / [H,W] or float32 images [C,H,W] / [H,W]");
  }
  if (s.row_shape.size() == 2) {
    s.channels = 1;
    s.height = s.row_shape[0];
    s.width = s.row_shape[1];
  } else if (s.row_shape.size() == 3 && s.dtype == DType::kUInt8) {
    s.height = s.row_shape[0];
    s.width = s.row_shape[1];
    s.channels = s.row_shape[2];
  } else if (s.row_shape.size() == 3) {
    s.channels = s.row_shape[0];
    s.height = s.row_shape[1];
    s.width = s.row_shape[2];
  } else {
    fail("field \"" + input.image_field + "\" is " + got +
         " per example; the model takes images of rank 2 or 3 (uint8 HWC, float32 CHW)");
  }
  if (s.channels < 1 || s.height < 1 || s.width < 1)
    fail("field \"" + input.image_field + "\" is empty: " + got);
  if (s.channels > 64) {
    fail("field \"" + input.image_field + "\" is " + got + ": " + std::to_string(s.channels) +
         " channels; uint8 images must be HWC and float32 images CHW");
  }
  if (label->dtype() != DType::kInt64 && label->dtype() != DType::kInt32) {
    fail("label field \"" + input.label_field + "\" is " + dtype_name(label->dtype()) +
         "; expected int64 class indices");
  }
  if (label->shape().size() != 1) {
    fail("label field \"" + input.label_field + "\" has shape " + shape_to_string(label->shape()) +
         " per batch; expected one integer class index per example");
  }
  size_t nc = std::max(input.mean.size(), input.std.size());
  if (nc > 1 && static_cast<int64_t>(nc) != s.channels) {
    fail("input mean/std have " + std::to_string(nc) + " values but the images have " +
         std::to_string(s.channels) + " channels");
  }
  return s;
}

}  // namespace dataecho::train
