// TFRecord: a file built byte by byte by an independent implementation (its own bitwise
// CRC32C and protobuf encoding), writer/reader round trips, ids, shards, save/restore,
// and every corruption under every on_error policy.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "dataecho/formats/crc32c.h"
#include "dataecho/formats/tfrecord.h"
#include "dataecho/spec/build.h"
#include "test_util.h"

namespace dataecho {
namespace {

using testing::error_of;
using testing::temp_dir;

// ---- an independent implementation -------------------------------------------------

uint32_t bitwise_crc32c(const std::string& s) {
  uint32_t c = 0xffffffffu;
  for (unsigned char b : s) {
    c ^= b;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
  }
  return ~c;
}
uint32_t masked(const std::string& s) {
  uint32_t c = bitwise_crc32c(s);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}
std::string le(uint64_t v, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  return s;
}
std::string frame(const std::string& data) {
  std::string len = le(data.size(), 8);
  return len + le(masked(len), 4) + data + le(masked(data), 4);
}
std::string varint(uint64_t v) {
  std::string s;
  while (v >= 0x80) {
    s.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  s.push_back(static_cast<char>(v));
  return s;
}
std::string field(int number, const std::string& payload) {  // wire type 2
  return varint((static_cast<uint64_t>(number) << 3) | 2) + varint(payload.size()) + payload;
}
std::string bytes_feature(const std::string& v) { return field(1, field(1, v)); }
std::string int64_feature(const std::vector<int64_t>& v) {
  std::string packed;
  for (int64_t x : v) packed += varint(static_cast<uint64_t>(x));
  return field(3, field(1, packed));
}
std::string float_feature(const std::vector<float>& v) {
  std::string packed;
  for (float x : v) {
    uint32_t u;
    std::memcpy(&u, &x, 4);
    packed += le(u, 4);
  }
  return field(2, field(1, packed));
}
std::string example(const std::vector<std::pair<std::string, std::string>>& features) {
  std::string map;
  for (const auto& [k, f] : features) map += field(1, field(1, k) + field(2, f));
  return field(1, map);
}
std::string labelled(int64_t i) {
  return example({{"image/encoded", bytes_feature("img" + std::to_string(i))},
                  {"image/class/label", int64_feature({i % 10})}});
}

void write(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}
std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::unique_ptr<Pipeline> build_in(const std::string& dir, const std::string& spec) {
  return build_pipeline(parse_spec_text(spec, "test"), BuildOptions{dir});
}
std::vector<Example> run_in(const std::string& dir, const std::string& spec) {
  auto p = build_in(dir, spec);
  return testing::drain(*p);
}

// ---- tests ----------------------------------------------------------------------------

TEST(Crc32c, KnownValuesAndMask) {
  EXPECT_EQ(crc32c::value("123456789", 9), 0xe3069283u);
  EXPECT_EQ(crc32c::value("", 0), 0u);
  std::string big(100003, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7 + i / 13);
  EXPECT_EQ(crc32c::value(big.data(), big.size()), bitwise_crc32c(big));
  EXPECT_EQ(crc32c::extend(crc32c::value(big.data(), 333), big.data() + 333, big.size() - 333),
            bitwise_crc32c(big));
  EXPECT_EQ(crc32c::unmask(crc32c::mask(0x12345678u)), 0x12345678u);
}

TEST(TfRecord, ReadsAFileBuiltByteByByte) {
  std::string dir = temp_dir();
  std::string bytes =
      frame(example({{"image/encoded", bytes_feature(std::string("\x89PNG\0\1", 6))},
                     {"image/class/label", int64_feature({7})},
                     {"bbox", float_feature({0.25f, 0.5f, 1.0f})},
                     {"ids", int64_feature({-1, 300, 1LL << 40})}})) +
      frame(example({{"image/encoded", bytes_feature("")},
                     {"image/class/label", int64_feature({3})},
                     {"bbox", float_feature({2.5f})},
                     {"ids", int64_feature({})}}));
  write(dir + "/a.tfrecord", bytes);
  auto v = run_in(dir, R"({"source": {"kind": "tfrecord", "uri": "a.tfrecord"}})");
  ASSERT_EQ(v.size(), 2u);
  // All features in key order, named by their keys, the standard image keys by the
  // names the image functions read ("image", "label").
  std::vector<std::string> names;
  for (const auto& [n, t] : v[0].fields()) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"bbox", "ids", "label", "image"}));
  EXPECT_EQ(v[0].get("image").bytes(), std::string_view("\x89PNG\0\1", 6));
  EXPECT_EQ(v[0].get("image").shape(), (Shape{6}));
  EXPECT_EQ(v[0].get("label").item<int64_t>(), 7);
  EXPECT_EQ(v[0].get("label").rank(), 0u);
  const Tensor& bbox = v[0].get("bbox");
  ASSERT_EQ(bbox.shape(), (Shape{3}));
  EXPECT_EQ(bbox.data<float>()[0], 0.25f);
  EXPECT_EQ(bbox.data<float>()[2], 1.0f);
  const Tensor& ids = v[0].get("ids");
  ASSERT_EQ(ids.shape(), (Shape{3}));
  EXPECT_EQ(ids.data<int64_t>()[0], -1);
  EXPECT_EQ(ids.data<int64_t>()[2], 1LL << 40);
  EXPECT_EQ(v[1].get("bbox").item<float>(), 2.5f);
  EXPECT_EQ(v[1].get("ids").shape(), (Shape{0}));
  EXPECT_EQ(v[1].get("image").shape(), (Shape{0}));
  EXPECT_EQ(v[1].id(), 1);

  // Features selected and renamed; raw mode gives the record bytes.
  v = run_in(dir, R"({"source": {"kind": "tfrecord", "uri": "a.tfrecord",
      "features": {"image": {"key": "image/encoded"}, "label": "image/class/label"}}})");
  ASSERT_EQ(v.size(), 2u);
  ASSERT_EQ(v[0].fields().size(), 2u);
  EXPECT_EQ(v[0].fields()[0].first, "image");
  EXPECT_EQ(v[1].get("label").item<int64_t>(), 3);
  v = run_in(dir, R"({"source": {"kind": "tfrecord", "uri": "a.tfrecord", "raw": true}})");
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(std::string(v[0].get("record").bytes()), bytes.substr(12, v[0].get("record").nbytes()));
}

TEST(TfRecord, WriterMatchesTheIndependentFramingAndRoundTrips) {
  std::string dir = temp_dir();
  std::vector<std::string> payloads = {"", "x", std::string(70000, 'q'), labelled(5)};
  {
    TfRecordWriter w(dir + "/w.tfrecord");
    for (const auto& p : payloads) w.write(p);
    EXPECT_EQ(w.records(), 4);
    w.close();
  }
  std::string want;
  for (const auto& p : payloads) want += frame(p);
  EXPECT_EQ(read(dir + "/w.tfrecord"), want);

  // Examples through serialize_tf_example and back.
  {
    TfRecordWriter w(dir + "/e.tfrecord");
    for (int i = 0; i < 10; ++i) {
      Example e;
      e.set("image", Tensor::from_bytes("pixels" + std::to_string(i)));
      e.set("label", Tensor::scalar<int64_t>(i));
      e.set("weights", Tensor::from_vector<float>({1.5f, -2.0f}));
      e.set("small", Tensor::scalar<int32_t>(-i));
      w.write(serialize_tf_example(e));
    }
  }
  auto v = run_in(dir, R"({"source": {"kind": "tfrecord", "uri": "e.tfrecord"}})");
  ASSERT_EQ(v.size(), 10u);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(v[i].get("image").bytes(), "pixels" + std::to_string(i));
    EXPECT_EQ(v[i].get("label").item<int64_t>(), i);
    EXPECT_EQ(v[i].get("small").item<int64_t>(), -i);
    EXPECT_EQ(v[i].get("weights").data<float>()[1], -2.0f);
  }
  EXPECT_EQ(serialize_tf_example(v[3]), serialize_tf_example(v[3])) << "deterministic bytes";
}

std::string write_shards(const std::string& dir, int files, int per_file) {
  for (int f = 0; f < files; ++f) {
    TfRecordWriter w(dir + "/train-0000" + std::to_string(f) + "-of-0000" + std::to_string(files) +
                     ".tfrecord");
    for (int i = 0; i < per_file; ++i) w.write(labelled(f * 100 + i));
  }
  return dir;
}

TEST(TfRecord, ShardsIdsAndInterleave) {
  std::string dir = write_shards(temp_dir(), 3, 4);
  std::string src = R"({"kind": "tfrecord", "uri": "train-{00000..00002}-of-00003.tfrecord",
      "features": {"image": {"key": "image/encoded"}, "label": {"key": "image/class/label"}}})";
  auto v = run_in(dir, R"({"source": )" + src + "}");
  ASSERT_EQ(v.size(), 12u);
  EXPECT_EQ(v[0].id(), 0);
  EXPECT_EQ(v[5].id(), (int64_t{1} << 40) | 1);
  EXPECT_EQ(v[5].get("image").bytes(), "img101");
  // The source's stats count each record once, read in order or interleaved.
  auto seq = build_in(dir, R"({"source": )" + src + "}");
  ASSERT_EQ(testing::drain(*seq).size(), 12u);
  EXPECT_EQ(seq->stats().nodes()[0]->elements.load(), 12);
  auto p =
      build_in(dir, R"({"source": )" + src + R"(, "stages": [{"op": "interleave", "cycle": 3}]})");
  auto w = testing::drain(*p);
  ASSERT_EQ(w.size(), 12u);
  EXPECT_EQ(p->stats().nodes()[0]->elements.load(), 12);
  EXPECT_EQ(w[0].id(), 0);
  EXPECT_EQ(w[1].id(), int64_t{1} << 40);
  EXPECT_EQ(w[2].id(), int64_t{2} << 40);
  // The same ids whatever the order: a glob lists the same files.
  auto g =
      run_in(dir, R"({"source": {"kind": "tfrecord", "uri": "train-*.tfrecord", "raw": true}})");
  EXPECT_EQ(testing::ids(g), testing::ids(v));
}

TEST(TfRecord, SaveRestoreAcrossFiles) {
  std::string dir = write_shards(temp_dir(), 3, 5);
  testing::expect_save_restore_identical(
      R"({"source": {"kind": "tfrecord", "uri": ")" + dir + R"(/train-*.tfrecord"}})",
      {0, 1, 4, 5, 6, 14, 15});
  testing::expect_save_restore_identical(
      R"({"source": {"kind": "tfrecord", "uri": ")" + dir +
          R"(/train-*.tfrecord"}, "stages": [{"op": "interleave", "cycle": 2}]})",
      {3, 8});
}

TEST(TfRecord, SpecErrors) {
  std::string dir = write_shards(temp_dir(), 1, 1);
  std::string msg = error_of(
      [&] { build_in(dir, R"({"source": {"kind": "tfrecord", "uri": "nope-*.tfrecord"}})"); });
  EXPECT_NE(msg.find("$.source.uri"), std::string::npos) << msg;
  EXPECT_NE(msg.find("nope-*.tfrecord"), std::string::npos) << msg;
  msg = error_of([&] {
    build_in(dir, R"({"source": {"kind": "tfrecord", "uri": "train-*", "on_error": "ignore"}})");
  });
  EXPECT_NE(msg.find("$.source.on_error"), std::string::npos) << msg;
  msg = error_of([&] {
    build_in(
        dir,
        R"({"source": {"kind": "tfrecord", "uri": "train-*", "features": {"x": {"kye": "a"}}}})");
  });
  EXPECT_NE(msg.find("$.source.features.x"), std::string::npos) << msg;
}

// ---- corruptions under every policy -----------------------------------------------------

enum class Corruption { kBadDataCrc, kInvalidExample, kMissingFeature, kBadLengthCrc, kTruncated };

struct Case {
  Corruption corruption;
  const char* reason;
  bool ends_file;
};

// a.tfrecord: records 0..4, record 2 corrupt; b.tfrecord: records 0..2, all good.
struct CorruptFiles {
  std::string dir;
  uint64_t bad_offset = 0;
  uint64_t a_size = 0;
};

CorruptFiles make_corrupt(Corruption c) {
  CorruptFiles f;
  f.dir = temp_dir();
  std::string a;
  for (int i = 0; i < 5; ++i) {
    std::string rec = labelled(i);
    if (i == 2) {
      f.bad_offset = a.size();
      if (c == Corruption::kInvalidExample) rec = "\xff\xff\xff\xff";
      if (c == Corruption::kMissingFeature) rec = example({{"image/encoded", bytes_feature("x")}});
    }
    std::string fr = frame(rec);
    if (i == 2 && c == Corruption::kBadDataCrc) fr[14] ^= 0x20;
    if (i == 2 && c == Corruption::kBadLengthCrc) fr[9] ^= 0x01;
    a += fr;
    if (i == 2 && c == Corruption::kTruncated) {
      a.resize(a.size() - 7);
      break;
    }
  }
  f.a_size = a.size();
  write(f.dir + "/a.tfrecord", a);
  std::string b;
  for (int i = 0; i < 3; ++i) b += frame(labelled(50 + i));
  write(f.dir + "/b.tfrecord", b);
  return f;
}

std::string corrupt_spec(const std::string& policy, const std::string& dir = "") {
  std::string d = dir.empty() ? "" : dir + "/";
  return R"({"source": {"kind": "tfrecord", "uri": [")" + d + R"(a.tfrecord", ")" + d +
         R"(b.tfrecord"], "on_error": ")" + policy +
         R"(", "features": {"image": {"key": "image/encoded"}, "label": {"key": "image/class/label"}}}})";
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  const char* names[] = {"BadDataCrc", "InvalidExample", "MissingFeature", "BadLengthCrc",
                         "Truncated"};
  return names[static_cast<int>(info.param.corruption)];
}

class Corrupt : public ::testing::TestWithParam<Case> {};

TEST_P(Corrupt, FailNamesFileRecordOffsetAndReason) {
  Case c = GetParam();
  CorruptFiles f = make_corrupt(c.corruption);
  auto p = build_in(f.dir, corrupt_spec("fail"));
  ASSERT_TRUE(p->next());
  ASSERT_TRUE(p->next());
  std::string msg = error_of([&] { p->next(); });
  EXPECT_NE(msg.find(c.reason), std::string::npos) << msg;
  EXPECT_NE(msg.find(f.dir + "/a.tfrecord record 2 at byte " + std::to_string(f.bad_offset)),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("0:tfrecord"), std::string::npos) << msg;
}

TEST_P(Corrupt, SkipDropsOnlyWhatTheFramingLoses) {
  Case c = GetParam();
  CorruptFiles f = make_corrupt(c.corruption);
  auto p = build_in(f.dir, corrupt_spec("skip"));
  auto v = testing::drain(*p);
  std::vector<int64_t> want = {0, 1};
  if (!c.ends_file) want.insert(want.end(), {3, 4});
  for (int64_t i = 0; i < 3; ++i) want.push_back((int64_t{1} << 40) | i);
  EXPECT_EQ(testing::ids(v), want);
  auto& stats = *p->stats().nodes()[0];
  EXPECT_EQ(stats.counter("skipped").load(), 1);
  EXPECT_EQ(stats.counter("bytes_lost").load(),
            c.ends_file ? static_cast<int64_t>(f.a_size - f.bad_offset) : 0);
  for (const auto& e : v) EXPECT_EQ(e.echo(), 0);
}

TEST_P(Corrupt, EchoRepeatsTheLastGoodExample) {
  Case c = GetParam();
  CorruptFiles f = make_corrupt(c.corruption);
  auto p = build_in(f.dir, corrupt_spec("echo"));
  auto v = testing::drain(*p);
  std::vector<int64_t> want = {0, 1, 1};
  if (!c.ends_file) want.insert(want.end(), {3, 4});
  for (int64_t i = 0; i < 3; ++i) want.push_back((int64_t{1} << 40) | i);
  EXPECT_EQ(testing::ids(v), want);
  ASSERT_GE(v.size(), 3u);
  EXPECT_EQ(v[2].echo(), 1);
  EXPECT_EQ(v[2].get("image").bytes(), "img1");
  EXPECT_TRUE(v[2].get("image").shares_buffer_with(v[1].get("image"))) << "an echo costs a pointer";
  EXPECT_EQ(v[1].echo(), 0);
  auto& stats = *p->stats().nodes()[0];
  EXPECT_EQ(stats.counter("repaired").load(), 1);
  EXPECT_EQ(stats.counter("skipped").load(), 0);
}

TEST_P(Corrupt, SaveRestoreAroundTheBadRecord) {
  Case c = GetParam();
  CorruptFiles f = make_corrupt(c.corruption);
  for (const char* policy : {"skip", "echo"}) {
    SCOPED_TRACE(policy);
    testing::expect_save_restore_identical(corrupt_spec(policy, f.dir), {1, 2, 3, 4});
  }
}

INSTANTIATE_TEST_SUITE_P(AllCorruptions, Corrupt,
                         ::testing::Values(Case{Corruption::kBadDataCrc, "bad data CRC", false},
                                           Case{Corruption::kInvalidExample, "invalid tf.Example",
                                                false},
                                           Case{Corruption::kMissingFeature,
                                                "missing feature 'image/class/label'", false},
                                           Case{Corruption::kBadLengthCrc, "bad length CRC", true},
                                           Case{Corruption::kTruncated, "truncated record", true}),
                         case_name);

TEST(TfRecord, EchoBeforeAnyGoodRecordSkips) {
  std::string dir = temp_dir();
  std::string bad = frame(labelled(0));
  bad[13] ^= 1;
  write(dir + "/x.tfrecord", bad + frame(labelled(1)));
  auto p =
      build_in(dir, R"({"source": {"kind": "tfrecord", "uri": "x.tfrecord", "on_error": "echo"}})");
  auto v = testing::drain(*p);
  EXPECT_EQ(testing::ids(v), (std::vector<int64_t>{1}));
  EXPECT_EQ(p->stats().nodes()[0]->counter("skipped").load(), 1);
}

TEST(TfRecord, ConsecutiveBadRecordsRaiseTheEchoIndex) {
  std::string dir = temp_dir();
  std::string b1 = frame(labelled(1)), b2 = frame(labelled(2));
  b1[13] ^= 1;
  b2[13] ^= 1;
  write(dir + "/x.tfrecord", frame(labelled(0)) + b1 + b2 + frame(labelled(3)));
  auto v =
      run_in(dir, R"({"source": {"kind": "tfrecord", "uri": "x.tfrecord", "on_error": "echo"}})");
  EXPECT_EQ(testing::ids(v), (std::vector<int64_t>{0, 0, 0, 3}));
  EXPECT_EQ(testing::echoes(v), (std::vector<int32_t>{0, 1, 2, 0}));
}

TEST(TfRecord, TruncatedHeaderAndEmptyFile) {
  std::string dir = temp_dir();
  write(dir + "/empty.tfrecord", "");
  write(dir + "/short.tfrecord", frame(labelled(0)) + std::string("\x05\0\0", 3));
  EXPECT_TRUE(run_in(dir, R"({"source": {"kind": "tfrecord", "uri": "empty.tfrecord"}})").empty());
  auto p = build_in(
      dir, R"({"source": {"kind": "tfrecord", "uri": "short.tfrecord", "on_error": "skip"}})");
  EXPECT_EQ(testing::drain(*p).size(), 1u);
  EXPECT_EQ(p->stats().nodes()[0]->counter("bytes_lost").load(), 3);
}

// Records are views of the reader's chunks: sizes around every chunk boundary, large
// bodies read on their own, records kept to the end (their chunks must not be reused)
// and records dropped at once (the chunk is reused in place), over plain and HTTP-like
// short reads alike.
std::vector<std::string> boundary_payloads() {
  constexpr size_t kChunk = TfRecordReader::kChunkBytes;
  std::vector<std::string> out;
  uint64_t x = 12345;
  auto next = [&] {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    return x >> 33;
  };
  std::vector<size_t> sizes = {0,          1,           kChunk / 2 - 4, kChunk / 2 - 3,
                               kChunk / 2, kChunk - 16, kChunk,         2 * kChunk + 5};
  for (int i = 0; i < 60; ++i) sizes.push_back(next() % (kChunk / 3));
  for (int i = 0; i < 5; ++i) sizes.push_back(next() % 12);
  for (size_t n : sizes) {
    std::string s(n, '\0');
    for (auto& c : s) c = static_cast<char>(next());
    out.push_back(std::move(s));
  }
  return out;
}

TEST(TfRecordReader, RecordsViewChunksAndStayIntactWhileHeld) {
  std::string dir = temp_dir();
  auto payloads = boundary_payloads();
  {
    TfRecordWriter w(dir + "/b.tfrecord");
    for (const auto& p : payloads) w.write(p);
  }
  std::vector<std::shared_ptr<Buffer>> held;
  {
    TfRecordReader r(open_stream(dir + "/b.tfrecord"));
    std::shared_ptr<Buffer> rec;
    while (r.next(&rec) == TfRecordReader::Status::kOk) held.push_back(rec);
    EXPECT_EQ(r.next(&rec), TfRecordReader::Status::kEnd);
  }  // the records outlive their reader
  ASSERT_EQ(held.size(), payloads.size());
  size_t views = 0;
  for (size_t i = 0; i < held.size(); ++i) {
    ASSERT_EQ(std::string_view(reinterpret_cast<const char*>(held[i]->data()), held[i]->size()),
              payloads[i])
        << "record " << i << " of " << payloads[i].size() << " bytes";
    if (payloads[i].size() + 4 <= TfRecordReader::kChunkBytes / 2) {
      EXPECT_EQ(held[i]->footprint(), TfRecordReader::kChunkBytes) << "record " << i;
      ++views;
    } else {
      EXPECT_LT(held[i]->footprint(), payloads[i].size() + 64) << "a large body has its own";
    }
  }
  EXPECT_GT(views, 60u);
}

TEST(TfRecordReader, RecordsDroppedAtOnceReadTheSame) {
  std::string dir = temp_dir();
  auto payloads = boundary_payloads();
  {
    TfRecordWriter w(dir + "/b.tfrecord");
    for (const auto& p : payloads) w.write(p);
  }
  TfRecordReader r(open_stream(dir + "/b.tfrecord"));
  size_t i = 0;
  while (true) {
    std::shared_ptr<Buffer> rec;
    if (r.next(&rec) != TfRecordReader::Status::kOk) break;
    ASSERT_LT(i, payloads.size());
    ASSERT_EQ(std::string_view(reinterpret_cast<const char*>(rec->data()), rec->size()),
              payloads[i])
        << "record " << i;
    ++i;
  }
  EXPECT_EQ(i, payloads.size());
}

TEST(TfRecordReader, ALoopIntoOneVariableReadsOnInTheSameChunk) {
  // next() releases what it is given before reading: the loop below holds no record
  // through the call, so the reader reads on into its one chunk, in place, instead of
  // alternating with a second (every record's bytes lie within one chunk's span).
  std::string dir = temp_dir();
  const std::string payload(100 << 10, 'r');
  const int records = 40;  // 4 MB: several chunk wraps
  {
    TfRecordWriter w(dir + "/c.tfrecord");
    for (int i = 0; i < records; ++i) w.write(payload);
  }
  TfRecordReader r(open_stream(dir + "/c.tfrecord"));
  std::shared_ptr<Buffer> rec;
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  int n = 0;
  while (r.next(&rec) == TfRecordReader::Status::kOk) {
    ASSERT_EQ(rec->size(), payload.size());
    const auto at = reinterpret_cast<uintptr_t>(rec->data());
    lo = std::min(lo, at);
    hi = std::max(hi, at + rec->size());
    ++n;
  }
  EXPECT_EQ(n, records);
  EXPECT_EQ(rec, nullptr) << "kEnd releases the last record too";
  EXPECT_LE(hi - lo, TfRecordReader::kChunkBytes);
}

TEST(TfRecordReader, RecordsReadTheSameThroughShortReads) {
  // A stream that returns at most 1000 bytes per read(), like an HTTP body in pieces,
  // and does not know its size.
  class Trickle : public ByteStream {
   public:
    explicit Trickle(std::string data) : data_(std::move(data)) {}
    size_t read(void* dst, size_t n) override {
      size_t k = std::min({n, size_t{1000}, data_.size() - pos_});
      std::memcpy(dst, data_.data() + pos_, k);
      pos_ += k;
      return k;
    }
    uint64_t position() const override { return pos_; }
    void seek(uint64_t offset) override { pos_ = offset; }
    int64_t size() const override { return -1; }
    const std::string& uri() const override { return uri_; }

   private:
    std::string data_;
    size_t pos_ = 0;
    std::string uri_ = "trickle";
  };
  auto payloads = boundary_payloads();
  std::string bytes;
  for (const auto& p : payloads) bytes += frame(p);
  TfRecordReader r(std::make_unique<Trickle>(bytes));
  std::vector<std::shared_ptr<Buffer>> held;
  std::shared_ptr<Buffer> rec;
  while (r.next(&rec) == TfRecordReader::Status::kOk) held.push_back(rec);
  ASSERT_EQ(held.size(), payloads.size());
  for (size_t i = 0; i < held.size(); ++i)
    ASSERT_EQ(std::string_view(reinterpret_cast<const char*>(held[i]->data()), held[i]->size()),
              payloads[i])
        << "record " << i;
}

TEST(TfRecord, ShuffleHoldsCopiesNotChunks) {
  std::string dir = temp_dir();
  {
    TfRecordWriter w(dir + "/s.tfrecord");
    for (int i = 0; i < 50; ++i) w.write(std::string(1000 + i, static_cast<char>('a' + i % 26)));
  }
  // Straight from the source a record views its chunk; out of a shuffle it has its own
  // buffer, so that the shuffle buffer's elements hold 50 KB, not 50 chunks.
  auto raw = run_in(dir, R"({"source": {"kind": "tfrecord", "uri": "s.tfrecord", "raw": true}})");
  ASSERT_EQ(raw.size(), 50u);
  EXPECT_TRUE(raw[0].get("record").pins_more_than_itself());
  auto v = run_in(dir, R"({"source": {"kind": "tfrecord", "uri": "s.tfrecord", "raw": true},
                           "stages": [{"op": "shuffle", "buffer": 20}]})");
  ASSERT_EQ(v.size(), 50u);
  for (const auto& e : v) {
    const Tensor& t = e.get("record");
    EXPECT_FALSE(t.pins_more_than_itself());
    size_t i = t.nbytes() - 1000;
    EXPECT_EQ(t.bytes(), std::string(1000 + i, static_cast<char>('a' + i % 26)));
  }
}

}  // namespace
}  // namespace dataecho
