// A language model's batches: token blocks as `pack` emits them, batched (padded_batch,
// or batch once pack's per-block `ids` field is dropped), checked once before training
// and turned into int64 tensors for the embedding.
#include "dataecho/core/error.h"
#include "dataecho/train/input.h"
#include "dataecho/train/torch_batch.h"

namespace dataecho::train {
namespace {

bool integer(DType d) { return d == DType::kInt32 || d == DType::kInt64; }

std::string field_names(const Example& batch) {
  std::string s;
  for (const auto& [name, t] : batch.fields()) s += (s.empty() ? "" : ", ") + name;
  return s.empty() ? std::string("none") : s;
}

}  // namespace

InputSignature inspect_token_batch(const Example& batch, const InputOptions& input,
                                   const std::string& what) {
  auto fail = [&](const std::string& message) {
    throw Error(ErrorCode::kInvalidArgument, "train", what + ": " + message);
  };
  if (!batch.is_batch())
    fail(
        "elements are single blocks, not batches: end the spec with \"padded_batch\" or \"batch\"");
  const Tensor* tokens = batch.find(input.tokens_field);
  if (!tokens) {
    fail("batches have no token field \"" + input.tokens_field + "\" (fields: " +
         field_names(batch) + "); set input.tokens_field or end the spec with pack and a batch");
  }
  const std::string got =
      std::string(dtype_name(tokens->dtype())) + " " + shape_to_string(tokens->shape());
  if (!integer(tokens->dtype()) || tokens->shape().size() != 2) {
    fail("token field \"" + input.tokens_field + "\" is " + got +
         "; expected int32 or int64 [batch, block length] (pack's blocks, batched)");
  }
  if (tokens->shape()[1] < 2) {
    fail("token field \"" + input.tokens_field + "\" has blocks of " +
         std::to_string(tokens->shape()[1]) +
         " token; a language model needs at least 2 (inputs and targets shifted by one)");
  }
  InputSignature s;
  s.tokens = true;
  s.dtype = tokens->dtype();
  s.row_shape = {tokens->shape()[1]};
  if (input.document_field.empty()) return s;
  const Tensor* doc = batch.find(input.document_field);
  if (!doc) {
    fail("batches have no document field \"" + input.document_field + "\" (fields: " +
         field_names(batch) + "); set input.document_field (\"\" for a causal mask only)");
  }
  if (!integer(doc->dtype()) || doc->shape() != tokens->shape()) {
    fail("document field \"" + input.document_field + "\" is " + dtype_name(doc->dtype()) + " " +
         shape_to_string(doc->shape()) + "; expected integers of the token field's shape " +
         shape_to_string(tokens->shape()));
  }
  s.document = true;
  return s;
}

TorchBatch token_batch_to_torch(const Example& batch, const InputOptions& input,
                                const InputSignature& sig) {
  TorchBatch out;
  torch::Tensor t = to_torch(batch.get(input.tokens_field));
  out.tokens = t.scalar_type() == torch::kInt64 ? t : t.to(torch::kInt64);
  if (sig.document) {
    torch::Tensor d = to_torch(batch.get(input.document_field));
    out.document = d.scalar_type() == torch::kInt64 ? d : d.to(torch::kInt64);
  }
  out.rows = out.tokens.size(0);
  out.fresh = static_cast<int64_t>(batch.fresh_rows());
  return out;
}

}  // namespace dataecho::train
