// TfRecordWriter and serialize_tf_example (see dataecho/formats/tfrecord.h).
#include <cerrno>
#include <cstring>
#include <iostream>

#include "dataecho/formats/crc32c.h"
#include "dataecho/formats/tfrecord.h"
#include "dataecho/proto/example.pb.h"

namespace dataecho {

TfRecordWriter::TfRecordWriter(const std::string& path) : path_(path) {
  file_ = std::fopen(path.c_str(), "wb");
  if (!file_)
    throw Error(ErrorCode::kIo, "tfrecord", std::string("cannot create: ") + std::strerror(errno),
                path);
  std::setvbuf(file_, nullptr, _IOFBF, 1 << 20);
}

TfRecordWriter::~TfRecordWriter() {
  if (!file_) return;
  try {
    close();
  } catch (const Error& e) {
    std::cerr << e.what() << "\n";
  }
}

void TfRecordWriter::write(std::string_view record) {
  if (!file_) throw Error(ErrorCode::kInvalidArgument, "tfrecord", "write after close", path_);
  unsigned char header[12];
  uint64_t n = record.size();
  for (int i = 0; i < 8; ++i) header[i] = static_cast<unsigned char>(n >> (8 * i));
  uint32_t lcrc = crc32c::mask(crc32c::value(header, 8));
  uint32_t dcrc = crc32c::mask(crc32c::value(record.data(), record.size()));
  unsigned char footer[4];
  for (int i = 0; i < 4; ++i) {
    header[8 + i] = static_cast<unsigned char>(lcrc >> (8 * i));
    footer[i] = static_cast<unsigned char>(dcrc >> (8 * i));
  }
  if (std::fwrite(header, 1, 12, file_) != 12 || std::fwrite(record.data(), 1, n, file_) != n ||
      std::fwrite(footer, 1, 4, file_) != 4) {
    throw Error(ErrorCode::kIo, "tfrecord", std::string("write failed: ") + std::strerror(errno),
                path_ + " record " + std::to_string(records_));
  }
  ++records_;
  bytes_ += 16 + n;
}

void TfRecordWriter::close() {
  if (!file_) return;
  std::FILE* f = file_;
  file_ = nullptr;
  if (std::fclose(f) != 0) {
    throw Error(ErrorCode::kIo, "tfrecord", std::string("close failed: ") + std::strerror(errno),
                path_);
  }
}

std::string serialize_tf_example(const Example& example) {
  proto::Example ex;
  auto* map = ex.mutable_features()->mutable_feature();
  for (const auto& [name, t] : example.fields()) {
    proto::Feature f;
    int64_t n = t.num_elements();
    switch (t.dtype()) {
      case DType::kUInt8:
        f.mutable_bytes_list()->add_value(std::string(t.bytes()));
        break;
      case DType::kInt32: {
        auto* l = f.mutable_int64_list();
        for (int64_t i = 0; i < n; ++i) l->add_value(t.data<int32_t>()[i]);
        break;
      }
      case DType::kInt64: {
        auto* l = f.mutable_int64_list();
        for (int64_t i = 0; i < n; ++i) l->add_value(t.data<int64_t>()[i]);
        break;
      }
      case DType::kFloat32: {
        auto* l = f.mutable_float_list();
        for (int64_t i = 0; i < n; ++i) l->add_value(t.data<float>()[i]);
        break;
      }
      case DType::kFloat64: {
        auto* l = f.mutable_float_list();
        for (int64_t i = 0; i < n; ++i) l->add_value(static_cast<float>(t.data<double>()[i]));
        break;
      }
    }
    (*map)[name] = std::move(f);
  }
  std::string out;
  // Deterministic: map entries in key order, so the same example gives the same bytes.
  {
    google::protobuf::io::StringOutputStream sos(&out);
    google::protobuf::io::CodedOutputStream cos(&sos);
    cos.SetSerializationDeterministic(true);
    ex.SerializeToCodedStream(&cos);
  }
  return out;
}

}  // namespace dataecho
