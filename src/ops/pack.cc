#include "dataecho/ops/pack.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "unary_dataset.h"

namespace dataecho {
namespace {

class PackIt : public Iterator {
 public:
  PackIt(std::unique_ptr<Iterator> in, const PackOptions* o) : in_(std::move(in)), o_(o) {}
  void save(StateWriter& w) override {
    w.begin("pack");
    w.write_bool(cur_.defined());
    if (cur_.defined()) {
      w.write_tensor(cur_);
      w.write_i64(meta_.id);
      w.write_i64(meta_.echo);
      w.write_i64(meta_.epoch);
    }
    w.write_i64(pos_);
    w.write_i64(blocks_);
    w.write_bool(done_);
    in_->save(w);
  }
  void restore(StateReader& r) override {
    r.expect("pack");
    cur_ = Tensor();
    cur_length_ = 0;
    if (r.read_bool()) {
      Tensor t = r.read_tensor();
      meta_.id = r.read_i64();
      meta_.echo = static_cast<int32_t>(r.read_i64());
      meta_.epoch = static_cast<int32_t>(r.read_i64());
      set_current(std::move(t));
    }
    pos_ = r.read_i64();
    blocks_ = r.read_i64();
    done_ = r.read_bool();
    in_->restore(r);
  }

 protected:
  std::optional<Example> next_impl() override;

 private:
  // The next sequence with tokens into cur_; false at the end of the input.
  bool load() {
    for (;;) {
      auto e = in_->next();
      if (!e) return false;
      if (stats()) stats()->counter("sequences") += 1;
      const Tensor& t = e->get(o_->field);
      if (t.dtype() != DType::kInt32 || t.rank() != 1 || e->is_batch())
        throw_error(ErrorCode::kInvalidArgument, label(),
                    "field '" + o_->field + "' is " + dtype_name(t.dtype()) + " " +
                        shape_to_string(t.shape()) + (e->is_batch() ? " in a batch" : "") +
                        ": pack takes single sequences of int32 tokens (tokenize gives them)",
                    e->describe());
      meta_ = e->row(0);
      set_current(t);
      pos_ = 0;
      if (cur_length_ > 0) return true;
    }
  }
  void set_current(Tensor t) {
    cur_ = std::move(t);
    const int64_t n = cur_.num_elements();
    const bool add_eos = o_->eos_id && (n == 0 || cur_.data<int32_t>()[n - 1] != *o_->eos_id);
    cur_length_ = n + (add_eos ? 1 : 0);
  }
  // Copies `count` tokens of the current sequence from pos_ to `dst`.
  void copy_tokens(int32_t* dst, int64_t count) {
    const int64_t n = cur_.num_elements();
    const int64_t real = std::max<int64_t>(0, std::min(count, n - pos_));
    std::memcpy(dst, cur_.data<int32_t>() + pos_, static_cast<size_t>(real) * sizeof(int32_t));
    if (real < count) dst[real] = *o_->eos_id;  // the appended eos
    pos_ += count;
  }

  std::unique_ptr<Iterator> in_;
  const PackOptions* o_;
  Tensor cur_;  // the sequence being split (int32 [n])
  RowMeta meta_;
  int64_t cur_length_ = 0;  // its tokens plus the eos to append
  int64_t pos_ = 0;         // tokens of it already in blocks
  int64_t blocks_ = 0;
  bool done_ = false;
  std::vector<int64_t> ids_;
  std::vector<int32_t> epochs_, echoes_;
};

std::optional<Example> PackIt::next_impl() {
  if (done_) return std::nullopt;
  const int64_t length = o_->length;
  // The block is written where its tensors will live: no copy out of a scratch vector.
  const size_t block_bytes = static_cast<size_t>(length) * sizeof(int32_t);
  auto token_buffer = Buffer::allocate(block_bytes);
  auto document_buffer = Buffer::allocate(block_bytes);
  auto* tokens = reinterpret_cast<int32_t*>(token_buffer->mutable_data());
  auto* documents = reinterpret_cast<int32_t*>(document_buffer->mutable_data());
  ids_.clear();
  epochs_.clear();
  echoes_.clear();
  int64_t filled = 0;
  int32_t document = -1, min_echo = 0, epoch = 0;
  while (filled < length) {
    if (!cur_.defined() || pos_ >= cur_length_) {
      if (!load()) {
        done_ = true;
        break;
      }
    }
    const int64_t take = std::min(length - filled, cur_length_ - pos_);
    ++document;
    ids_.push_back(meta_.id);
    epochs_.push_back(meta_.epoch);
    echoes_.push_back(meta_.echo);
    min_echo = document == 0 ? meta_.echo : std::min(min_echo, meta_.echo);
    if (document == 0) epoch = meta_.epoch;
    copy_tokens(tokens + filled, take);
    std::fill_n(documents + filled, take, document);
    filled += take;
  }
  if (filled == 0 || (filled < length && o_->drop_remainder)) return std::nullopt;
  std::fill(tokens + filled, tokens + length, o_->pad_id);
  std::fill(documents + filled, documents + length, -1);
  Example out(blocks_++);
  out.set_echo(min_echo);
  out.stamp_epoch(epoch);
  out.set(o_->field, Tensor(DType::kInt32, {length}, std::move(token_buffer)));
  out.set(o_->document_field, Tensor(DType::kInt32, {length}, std::move(document_buffer)));
  out.set(o_->ids_field, Tensor::from_vector(ids_));
  if (!o_->epochs_field.empty()) out.set(o_->epochs_field, Tensor::from_vector(epochs_));
  if (!o_->echoes_field.empty()) out.set(o_->echoes_field, Tensor::from_vector(echoes_));
  if (stats()) {
    stats()->counter("tokens") += filled;
    stats()->counter("pad_tokens") += length - filled;
  }
  return out;
}

}  // namespace

DatasetPtr make_pack(DatasetPtr input, const PackOptions& o) {
  if (o.length < 1)
    throw_error(ErrorCode::kInvalidArgument, "pack",
                "length must be >= 1, got " + std::to_string(o.length));
  // The three fields pack always writes, and the two it writes when named.
  std::set<std::string> names = {o.field, o.document_field, o.ids_field};
  size_t named = 3;
  for (const std::string* f : {&o.epochs_field, &o.echoes_field})
    if (!f->empty()) names.insert(*f), ++named;
  if (names.size() != named || names.count(""))
    throw_error(ErrorCode::kInvalidArgument, "pack",
                "field, document_field and ids_field (and epochs_field and echoes_field when "
                "given) must be different, non-empty names");
  return std::make_shared<UnaryDataset<PackOptions, PackIt>>("pack", std::move(input), o);
}

}  // namespace dataecho
