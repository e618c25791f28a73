#include "dataecho/core/example.h"

namespace dataecho {

void Example::set(std::string_view name, Tensor tensor) {
  for (auto& f : fields_) {
    if (f.first == name) {
      f.second = std::move(tensor);
      return;
    }
  }
  fields_.emplace_back(std::string(name), std::move(tensor));
}

const Tensor* Example::find(std::string_view name) const {
  for (const auto& f : fields_) {
    if (f.first == name) return &f.second;
  }
  return nullptr;
}

const Tensor& Example::get(std::string_view name) const {
  if (const Tensor* t = find(name)) return *t;
  std::string have;
  for (const auto& f : fields_) have += (have.empty() ? "" : ", ") + f.first;
  throw_error(
      ErrorCode::kNotFound, "example",
      "no field '" + std::string(name) + "' (fields: " + (have.empty() ? "none" : have) + ")",
      describe());
}

bool Example::erase(std::string_view name) {
  for (auto it = fields_.begin(); it != fields_.end(); ++it) {
    if (it->first == name) {
      fields_.erase(it);
      return true;
    }
  }
  return false;
}

void Example::compact() {
  for (auto& f : fields_)
    if (f.second.pins_more_than_itself()) f.second = f.second.compacted();
}

size_t Example::nbytes() const {
  size_t n = 0;
  for (const auto& f : fields_) n += f.second.nbytes();
  return n;
}

std::vector<RowMeta> Example::rows() const {
  if (rows_) return *rows_;
  return {single_};
}

size_t Example::fresh_rows() const {
  if (!rows_) return single_.echo == 0 ? 1 : 0;
  size_t n = 0;
  for (const auto& r : *rows_) n += r.echo == 0;
  return n;
}

void Example::set_id(int64_t id) {
  if (rows_) throw_error(ErrorCode::kInvalidArgument, "example", "set_id on a batch");
  single_.id = id;
}

void Example::set_echo(int32_t echo) {
  if (rows_) throw_error(ErrorCode::kInvalidArgument, "example", "set_echo on a batch");
  single_.echo = echo;
}

void Example::set_rows(std::vector<RowMeta> rows) {
  rows_ = std::make_shared<const std::vector<RowMeta>>(std::move(rows));
}

void Example::add_echo(int32_t delta) {
  if (delta == 0) return;
  if (!rows_) {
    single_.echo += delta;
    return;
  }
  auto rows = *rows_;
  for (auto& r : rows) r.echo += delta;
  set_rows(std::move(rows));
}

void Example::stamp_epoch(int32_t epoch) {
  if (epoch == 0) return;
  if (!rows_) {
    if (single_.epoch == 0) single_.epoch = epoch;
    return;
  }
  bool any = false;
  for (const auto& r : *rows_) any = any || r.epoch == 0;
  if (!any) return;
  auto rows = *rows_;
  for (auto& r : rows)
    if (r.epoch == 0) r.epoch = epoch;
  set_rows(std::move(rows));
}

std::string Example::describe() const {
  if (!rows_) return "element id " + std::to_string(single_.id);
  if (rows_->empty()) return "empty batch";
  return "batch of " + std::to_string(rows_->size()) + " rows, ids " +
         std::to_string(rows_->front().id) + ".." + std::to_string(rows_->back().id);
}

}  // namespace dataecho
