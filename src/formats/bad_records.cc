#include "bad_records.h"

#include <iostream>

#include "dataecho/core/error.h"
#include "dataecho/core/redact.h"

namespace dataecho {

std::optional<Example> BadRecords::bad(NodeStats* stats, const std::string& label,
                                       const std::string& reason, int64_t record, uint64_t offset,
                                       uint64_t lost_bytes) {
  std::string where =
      uri_ + " record " + std::to_string(record) + " at byte " + std::to_string(offset);
  std::string why = reason;
  if (lost_bytes > 0)
    why += "; the remaining " + std::to_string(lost_bytes) + " bytes of the file cannot be read";
  return handle(
      stats, label, why, where,
      reason + " at record " + std::to_string(record) + ", byte " + std::to_string(offset),
      lost_bytes);
}

std::optional<Example> BadRecords::bad_file(NodeStats* stats, const std::string& label,
                                            const std::string& reason, const std::string& where) {
  return handle(stats, label, reason, where, reason + ": " + where, 0);
}

std::optional<Example> BadRecords::handle(NodeStats* stats, const std::string& label,
                                          std::string why, const std::string& where,
                                          std::string first, uint64_t lost_bytes) {
  if (policy_ == OnError::kFail) throw Error(ErrorCode::kDataLoss, label, std::move(why), where);
  if (first_.empty()) first_ = redact_urls(first);
  if (lost_bytes > 0) {
    lost_ += lost_bytes;
    if (stats) stats->counter("bytes_lost") += static_cast<int64_t>(lost_bytes);
  }
  if (policy_ == OnError::kEcho && last_good_) {
    ++repeats_;
    ++repaired_;
    if (stats) stats->counter("repaired") += 1;
    Example e = *last_good_;
    e.set_echo(last_good_->echo() + repeats_);
    return e;
  }
  ++skipped_;
  if (stats) stats->counter("skipped") += 1;
  return std::nullopt;
}

void BadRecords::finish() {
  if (reported_ || (skipped_ == 0 && repaired_ == 0 && lost_ == 0)) return;
  reported_ = true;
  std::cerr << format_ << ": " << redact_urls(uri_) << ": ";
  if (skipped_ > 0) std::cerr << skipped_ << " bad record(s) skipped";
  if (repaired_ > 0) std::cerr << (skipped_ > 0 ? ", " : "") << repaired_ << " replaced by an echo";
  if (lost_ > 0) std::cerr << ", " << lost_ << " bytes at the end of the file lost";
  std::cerr << " (first: " << first_ << ")\n";
}

void BadRecords::save(StateWriter& w) const {
  w.write_bool(last_good_.has_value());
  if (last_good_) w.write_example(*last_good_);
  w.write_i64(repeats_);
  w.write_i64(skipped_);
  w.write_i64(repaired_);
  w.write_u64(lost_);
  w.write_string(first_);
}

void BadRecords::restore(StateReader& r) {
  last_good_.reset();
  if (r.read_bool()) last_good_ = r.read_example();
  repeats_ = static_cast<int32_t>(r.read_i64());
  skipped_ = r.read_i64();
  repaired_ = r.read_i64();
  lost_ = r.read_u64();
  first_ = redact_urls(r.read_string());
}

}  // namespace dataecho
