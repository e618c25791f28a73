#include "dataecho/train/torch_batch.h"

namespace dataecho::train {
namespace {

torch::ScalarType scalar_type(DType d) {
  switch (d) {
    case DType::kUInt8:
      return torch::kUInt8;
    case DType::kInt32:
      return torch::kInt32;
    case DType::kInt64:
      return torch::kInt64;
    case DType::kFloat32:
      return torch::kFloat32;
    case DType::kFloat64:
      return torch::kFloat64;
  }
  return torch::kUInt8;
}

}  // namespace

torch::Tensor to_torch(const Tensor& tensor) {
  std::vector<int64_t> sizes(tensor.shape().begin(), tensor.shape().end());
  auto options = torch::TensorOptions().dtype(scalar_type(tensor.dtype()));
  void* data = const_cast<std::byte*>(tensor.raw_data());
  if (!tensor.buffer()) {
    // Stored inline in the Tensor object itself: nothing to share, copy it.
    return torch::from_blob(data, sizes, options).clone();
  }
  // The deleter holds a reference to the buffer: the torch tensor keeps it alive, and the
  // buffer is never written once a Tensor holds it, so sharing it read-only is safe.
  std::shared_ptr<const Buffer> owner = tensor.buffer();
  return torch::from_blob(
      data, sizes, [owner](void*) mutable { owner.reset(); }, options);
}

TorchBatch batch_to_torch(const Example& batch, const InputOptions& input,
                          const InputSignature& sig) {
  TorchBatch out;
  const Tensor& image = batch.get(input.image_field);
  torch::Tensor x = to_torch(image);
  const int64_t n = x.size(0);
  if (sig.dtype == DType::kUInt8) {
    // [N,H,W,C] or [N,H,W] uint8 -> float [N,C,H,W]; the conversion is the one copy.
    x = x.reshape({n, sig.height, sig.width, sig.channels})
            .to(torch::kFloat32)
            .permute({0, 3, 1, 2});
    x = x.contiguous().mul_(1.0 / 255.0);
    if (!input.mean.empty() || !input.std.empty()) {
      auto per_channel = [&](const std::vector<double>& v, double fallback) {
        std::vector<float> f(static_cast<size_t>(sig.channels), static_cast<float>(fallback));
        for (size_t c = 0; c < f.size(); ++c) {
          if (!v.empty()) f[c] = static_cast<float>(v.size() == 1 ? v[0] : v[c]);
        }
        return torch::tensor(f).reshape({1, sig.channels, 1, 1});
      };
      x.sub_(per_channel(input.mean, 0.0)).div_(per_channel(input.std, 1.0));
    }
  } else {
    x = x.reshape({n, sig.channels, sig.height, sig.width});
    if (!x.is_contiguous()) x = x.contiguous();
  }
  out.images = x;
  torch::Tensor y = to_torch(batch.get(input.label_field));
  out.labels = y.scalar_type() == torch::kInt64 ? y : y.to(torch::kInt64);
  out.rows = n;
  out.fresh = static_cast<int64_t>(batch.fresh_rows());
  return out;
}

}  // namespace dataecho::train
