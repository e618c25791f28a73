// The record index of the sources (where each record of a shard starts: a tfrecord
// header walk or its sidecar, tar sample starts, text record starts; nothing to find for
// the random-access sources) and their record ranges: a shard's records [begin, end),
// read from the indexed offset, with the ids a full read gives them.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>

#include "dataecho/formats/files.h"
#include "dataecho/formats/idx.h"
#include "dataecho/formats/tar.h"
#include "dataecho/formats/text.h"
#include "dataecho/formats/tfrecord.h"
#include "dataecho/ops/sources.h"
#include "test_util.h"

namespace dataecho {
namespace {

using testing::error_of;
using testing::temp_dir;

using testing::write_file;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::vector<Example> drain(const DatasetPtr& ds) {
  auto it = ds->make_iterator({});
  return testing::drain(*it);
}

// Record i of a test file: `size(i)` bytes that name the file and the record.
std::string record_bytes(const std::string& name, int i, size_t size) {
  std::string s = name + " record " + std::to_string(i) + ";";
  s.resize(std::max(size, s.size()), static_cast<char>('a' + i % 26));
  return s;
}

// A tfrecord file of records of the given sizes; returns the offset of each record and
// then the file's size, as the writer put them.
std::vector<uint64_t> write_tfrecord(const std::string& path, const std::vector<size_t>& sizes) {
  TfRecordWriter w(path);
  std::vector<uint64_t> offsets;
  for (size_t i = 0; i < sizes.size(); ++i) {
    offsets.push_back(w.bytes());
    w.write(record_bytes(path, static_cast<int>(i), sizes[i]));
  }
  w.close();
  offsets.push_back(w.bytes());
  return offsets;
}

// The sidecar DALI's tfrecord2idx writes: "offset size" per record.
std::string dali_sidecar(const std::vector<uint64_t>& offsets) {
  std::string s;
  for (size_t i = 0; i + 1 < offsets.size(); ++i)
    s += std::to_string(offsets[i]) + " " + std::to_string(offsets[i + 1] - offsets[i]) + "\n";
  return s;
}

DatasetPtr tfrecord_source(const std::vector<std::string>& uris) {
  TfRecordOptions o;
  o.uris = uris;
  o.raw = true;
  return make_tfrecord_source(o);
}

// Small records, one past the scan's read-through size (64 KiB), an empty one.
const std::vector<size_t> kSizes = {10, 3000, 0, 70'000, 1, 200'000, 40};

TEST(RecordIndex, TfRecordScanFindsEveryRecordStart) {
  const std::string dir = temp_dir();
  const auto a = write_tfrecord(dir + "/a.tfrecord", kSizes);
  const auto b = write_tfrecord(dir + "/b.tfrecord", {5, 6});
  const auto empty = write_tfrecord(dir + "/empty.tfrecord", {});
  auto src = tfrecord_source({dir + "/a.tfrecord", dir + "/b.tfrecord", dir + "/empty.tfrecord"});
  EXPECT_EQ(src->not_seekable_reason(), "");
  const std::vector<ShardIndex> index = src->record_index();
  ASSERT_EQ(index.size(), 3u);
  const std::vector<std::vector<uint64_t>> want = {a, b, empty};
  for (size_t s = 0; s < 3; ++s) {
    EXPECT_EQ(index[s].offsets, want[s]) << s;
    EXPECT_EQ(index[s].records, static_cast<int64_t>(want[s].size()) - 1) << s;
    EXPECT_EQ(index[s].bytes, static_cast<int64_t>(want[s].back())) << s;
  }
  EXPECT_EQ(index[0].uri, dir + "/a.tfrecord");
  EXPECT_EQ(index[0].records, 7);
  EXPECT_EQ(index[2].records, 0);
}

TEST(RecordIndex, ACorruptTfRecordIsRefusedNamingTheFileAndTheRecord) {
  const std::string dir = temp_dir();
  const auto offsets = write_tfrecord(dir + "/t.tfrecord", {100, 200, 300});
  const std::string good = read_file(dir + "/t.tfrecord");
  // Cut inside record 2's body: the header walk finds it runs past the end.
  write_file(dir + "/cut.tfrecord", good.substr(0, offsets[2] + 50));
  std::string err = error_of([&] { tfrecord_source({dir + "/cut.tfrecord"})->record_index(); });
  EXPECT_CONTAINS(err, "cut.tfrecord record 2 at byte " + std::to_string(offsets[2]));
  EXPECT_CONTAINS(err, "truncated");
  // Record 1's length corrupted: its length CRC no longer matches.
  std::string bad = good;
  bad[offsets[1] + 1] ^= 0x40;
  write_file(dir + "/bad.tfrecord", bad);
  err = error_of([&] { tfrecord_source({dir + "/bad.tfrecord"})->record_index(); });
  EXPECT_CONTAINS(err, "bad.tfrecord record 1 at byte " + std::to_string(offsets[1]));
  EXPECT_CONTAINS(err, "bad length CRC");
  // A header cut short.
  write_file(dir + "/head.tfrecord", good.substr(0, offsets[1] + 5));
  err = error_of([&] { tfrecord_source({dir + "/head.tfrecord"})->record_index(); });
  EXPECT_CONTAINS(err, "head.tfrecord record 1 at byte " + std::to_string(offsets[1]));
  EXPECT_CONTAINS(err, "truncated");
}

TEST(RecordIndex, SidecarIsUsedAndAStaleOneIsRefused) {
  const std::string dir = temp_dir();
  // A file whose bytes are no TFRecord at all (zeros: the walk would find a bad length
  // CRC at byte 0) with a sidecar of the right size: the index is the sidecar's, so the
  // file was not read.
  write_file(dir + "/zeros.tfrecord", std::string(100, '\0'));
  write_file(dir + "/zeros.tfrecord.idx", "0 30\n30 16\n46 54\n");
  auto zeros = tfrecord_source({dir + "/zeros.tfrecord"});
  std::vector<ShardIndex> index = zeros->record_index();
  ASSERT_EQ(index.size(), 1u);
  EXPECT_EQ(index[0].offsets, (std::vector<uint64_t>{0, 30, 46, 100}));
  EXPECT_EQ(index[0].records, 3);
  EXPECT_EQ(index[0].bytes, 100);

  // A real file with its sidecar: the same index as the walk, and only the sidecar read.
  const auto offsets = write_tfrecord(dir + "/t.tfrecord", kSizes);
  write_file(dir + "/t.tfrecord.idx", dali_sidecar(offsets));
  auto src = tfrecord_source({dir + "/t.tfrecord"});
  auto stats = std::make_shared<NodeStats>("0:tfrecord");
  std::const_pointer_cast<Dataset>(src)->attach("0:tfrecord", stats);
  index = src->record_index();
  EXPECT_EQ(index[0].offsets, offsets);
  EXPECT_EQ(stats->counter("io_bytes").load(),
            static_cast<int64_t>(read_file(dir + "/t.tfrecord.idx").size()));

  // The file grew after its sidecar was written: refused, naming both and the sizes.
  {
    TfRecordWriter w(dir + "/grown.tfrecord");
    w.write("one");
    w.write("two");
    w.close();
  }
  write_file(dir + "/grown.tfrecord.idx", "0 19\n");
  std::string err = error_of([&] { tfrecord_source({dir + "/grown.tfrecord"})->record_index(); });
  EXPECT_CONTAINS(err, "grown.tfrecord.idx");
  EXPECT_CONTAINS(err, "end at byte 19");
  EXPECT_CONTAINS(err, "has 38 bytes");

  // Records that do not follow each other, and a line that is no "offset size".
  write_file(dir + "/grown.tfrecord.idx", "0 19\n20 18\n");
  err = error_of([&] { tfrecord_source({dir + "/grown.tfrecord"})->record_index(); });
  EXPECT_CONTAINS(err, "grown.tfrecord.idx line 2");
  EXPECT_CONTAINS(err, "record 1 starts at byte 20");
  write_file(dir + "/grown.tfrecord.idx", "0 19\n19 x\n");
  err = error_of([&] { tfrecord_source({dir + "/grown.tfrecord"})->record_index(); });
  EXPECT_CONTAINS(err, "grown.tfrecord.idx line 2");
  EXPECT_CONTAINS(err, "\"19 x\"");
}

TEST(RecordIndex, AFileIsIndexedOnceAndAgainWhenItChanges) {
  const std::string dir = temp_dir();
  write_tfrecord(dir + "/t.tfrecord", {10, 20, 30});
  auto src = tfrecord_source({dir + "/t.tfrecord"});
  auto stats = std::make_shared<NodeStats>("0:tfrecord");
  std::const_pointer_cast<Dataset>(src)->attach("0:tfrecord", stats);
  std::atomic<int64_t>& read = stats->counter("io_bytes");
  EXPECT_EQ(src->record_index()[0].records, 3);
  const int64_t first = read.load();
  EXPECT_GT(first, 0);
  EXPECT_EQ(src->record_index()[0].records, 3);
  EXPECT_EQ(read.load(), first);  // the same file: not read again
  const auto offsets = write_tfrecord(dir + "/t.tfrecord", {10, 20, 30, 40, 50});
  EXPECT_EQ(src->record_index()[0].offsets, offsets);
  EXPECT_GT(read.load(), first);
}

// ---- the sources that cannot start in the middle ------------------------------------

void gnu_tar(const std::string& args) {
  std::string cmd = "tar --sort=name " + args;
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

// A tar shard of n samples key{i}.{bin,cls} made by GNU tar with `flags` ("-cf", "-czf").
void make_tar(const std::string& path, int n, const std::string& flags) {
  const std::string src = path + ".src";
  for (int i = 0; i < n; ++i) {
    const std::string key = src + "/sample" + std::to_string(i);
    write_file(key + ".bin", record_bytes(path, i, 100 + 600 * static_cast<size_t>(i)));
    write_file(key + ".cls", std::to_string(i) + "\n");
  }
  gnu_tar(flags + " " + path + " -C " + src + " .");
}

TEST(RecordRange, CompressedSourcesSayTheyCannotSeek) {
  const std::string dir = temp_dir();
  make_tar(dir + "/s.tar.gz", 5, "-czf");
  std::string lines;
  for (int i = 0; i < 5; ++i) lines += "line " + std::to_string(i) + "\n";
  testing::write_gzip(dir + "/t.txt.gz", lines);
  TarOptions to;
  to.uris = {dir + "/s.tar.gz"};
  TextOptions xo;
  xo.uris = {dir + "/t.txt.gz"};
  struct Case {
    DatasetPtr src;
    std::string file;
  };
  for (const Case& c :
       {Case{make_tar_source(to), "s.tar.gz"}, Case{make_text_source(xo), "t.txt.gz"}}) {
    SCOPED_TRACE(c.file);
    const std::string why = c.src->not_seekable_reason();
    EXPECT_CONTAINS(why, c.file);
    EXPECT_CONTAINS(why, "compressed (gzip)");
    EXPECT_CONTAINS(why, "decompress");
    EXPECT_CONTAINS(error_of([&] { c.src->record_index(); }), why);
    // A range from the middle: refused when it opens, naming the file and the record.
    auto range = c.src->record_range({0, 2, 4, 1234});
    std::string err = error_of([&] { drain(range); });
    EXPECT_CONTAINS(err, "cannot start at record 2: gzip has no index");
    EXPECT_CONTAINS(err, c.file);
    // A range from the start reads on from there, as a full read does.
    auto head = drain(c.src->record_range({0, 0, 3, 0}));
    auto full = drain(c.src);
    ASSERT_EQ(head.size(), 3u);
    for (size_t i = 0; i < 3; ++i) EXPECT_EQ(head[i].id(), full[i].id());
  }
  // A node that is no source says so.
  auto concat = make_concatenate({make_range({3, 1})});
  EXPECT_CONTAINS(concat->not_seekable_reason(), "concatenate");
  EXPECT_CONTAINS(error_of([&] { concat->record_index(); }), "concatenate");
}

// ---- ranges of every source that has them -------------------------------------------

// A source kind for the range tests: its source over small generated data, and the field
// that holds each record's bytes.
struct SourceKind {
  std::string name;
  std::function<DatasetPtr(const std::string& dir)> make;
  std::string field;
};

DatasetPtr tfrecord_kind(const std::string& dir) {
  write_tfrecord(dir + "/a.tfrecord", kSizes);
  write_tfrecord(dir + "/b.tfrecord", {7, 0, 9, 80'000});
  return tfrecord_source({dir + "/a.tfrecord", dir + "/b.tfrecord"});
}

DatasetPtr tar_kind(const std::string& dir) {
  make_tar(dir + "/a.tar", 6, "-cf");
  make_tar(dir + "/b.tar", 3, "-cf");
  TarOptions o;
  o.uris = {dir + "/a.tar", dir + "/b.tar"};
  return make_tar_source(o);
}

DatasetPtr text_kind(const std::string& dir) {
  write_file(dir + "/a.txt", "first\nsecond line\r\nthird\nfourth\nfifth, last without newline");
  write_file(dir + "/b.txt", "one\ntwo\nthree\n");
  TextOptions o;
  o.uris = {dir + "/a.txt", dir + "/b.txt"};
  return make_text_source(o);
}

// An IDX file: the magic for unsigned bytes, big-endian dims, then the data.
void write_idx(const std::string& path, const std::vector<int32_t>& dims, const std::string& data) {
  std::string s{'\0', '\0', '\x08', static_cast<char>(dims.size())};
  for (int32_t d : dims)
    for (int k = 3; k >= 0; --k) s.push_back(static_cast<char>((d >> (8 * k)) & 0xff));
  write_file(path, s + data);
}

DatasetPtr idx_kind(const std::string& dir) {
  std::string images, labels;
  for (int i = 0; i < 7; ++i) {
    images += std::string(4, static_cast<char>(10 + i));
    labels.push_back(static_cast<char>(i % 3));
  }
  write_idx(dir + "/images", {7, 2, 2}, images);
  write_idx(dir + "/labels", {7}, labels);
  IdxOptions o;
  o.images = dir + "/images";
  o.labels = dir + "/labels";
  return make_idx_source(o);
}

DatasetPtr files_kind(const std::string& dir) {
  for (int i = 0; i < 6; ++i)
    write_file(dir + "/f/" + std::to_string(i) + ".bin", record_bytes("f", i, 10 + 3 * i));
  FilesOptions o;
  o.uris = {dir + "/f/*.bin"};
  o.reads_in_flight = 2;
  return make_files_source(o);
}

DatasetPtr range_kind(const std::string&) { return make_range({12, 2}); }

DatasetPtr memory_kind(const std::string&) {
  std::vector<Example> v;
  for (int i = 0; i < 5; ++i) {
    Example e(100 + i);
    e.set("text", Tensor::from_bytes("example " + std::to_string(i)));
    v.push_back(std::move(e));
  }
  return make_memory_source(std::move(v), /*keep_ids=*/true);
}

void PrintTo(const SourceKind& kind, std::ostream* os) { *os << kind.name; }

class RecordRangeOf : public ::testing::TestWithParam<SourceKind> {};

// The bytes of `field` of each element, with its id.
std::vector<std::pair<int64_t, std::string>> contents(const std::vector<Example>& v,
                                                      const std::string& field) {
  std::vector<std::pair<int64_t, std::string>> out;
  for (const Example& e : v) out.emplace_back(e.id(), std::string(e.get(field).bytes()));
  return out;
}

// Every range [b, e) of every shard reads exactly the records b..e-1 of that shard, as a
// full read gives them (the data holds no record that a full read leaves out, so shard s's
// records are the next index[s].records elements of the full read).
TEST_P(RecordRangeOf, ReadsExactlyItsRecords) {
  const SourceKind& kind = GetParam();
  const DatasetPtr src = kind.make(temp_dir());
  EXPECT_EQ(src->not_seekable_reason(), "");
  const auto full = contents(drain(src), kind.field);
  const std::vector<ShardIndex> index = src->record_index();
  size_t first = 0;  // the full read's position of the shard's first record
  for (size_t s = 0; s < index.size(); ++s) {
    const ShardIndex& ix = index[s];
    ASSERT_TRUE(ix.offsets.empty() || ix.offsets.size() == static_cast<size_t>(ix.records) + 1);
    for (int64_t b = 0; b <= ix.records; ++b) {
      for (int64_t e = b; e <= ix.records; ++e) {
        const uint64_t offset = ix.offsets.empty() ? 0 : ix.offsets[static_cast<size_t>(b)];
        auto got =
            contents(drain(src->record_range({static_cast<int64_t>(s), b, e, offset})), kind.field);
        std::vector<std::pair<int64_t, std::string>> want(
            full.begin() + static_cast<int64_t>(first) + b,
            full.begin() + static_cast<int64_t>(first) + e);
        EXPECT_EQ(got, want) << "shard " << s << " [" << b << ", " << e << ")";
      }
    }
    first += static_cast<size_t>(ix.records);
  }
  EXPECT_EQ(first, full.size());
}

// A range iterator saved after its first element continues in a fresh one of the same range.
TEST_P(RecordRangeOf, RestoresInsideItsRange) {
  const SourceKind& kind = GetParam();
  const DatasetPtr src = kind.make(temp_dir());
  const ShardIndex ix = src->record_index()[0];
  ASSERT_GE(ix.records, 4);
  const RecordRange r{0, 1, ix.records - 1, ix.offsets.empty() ? 0 : ix.offsets[1]};
  const auto whole = contents(drain(src->record_range(r)), kind.field);
  auto it = src->record_range(r)->make_iterator({});
  ASSERT_TRUE(it->next().has_value());
  StateWriter w;
  it->save(w);
  auto again = src->record_range(r)->make_iterator({});
  StateReader reader(w.data());
  again->restore(reader);
  auto rest = contents(testing::drain(*again), kind.field);
  rest.insert(rest.begin(), whole.front());
  EXPECT_EQ(rest, whole);
}

INSTANTIATE_TEST_SUITE_P(RecordRange, RecordRangeOf,
                         ::testing::Values(SourceKind{"tfrecord", tfrecord_kind, "record"},
                                           SourceKind{"tar", tar_kind, "bin"},
                                           SourceKind{"text", text_kind, "text"},
                                           SourceKind{"idx", idx_kind, "image"},
                                           SourceKind{"files", files_kind, "image"},
                                           SourceKind{"range", range_kind, "value"},
                                           SourceKind{"memory", memory_kind, "text"}),
                         [](const auto& info) { return info.param.name; });

TEST(RecordRange, TextRangesCountTheRecordsAFullReadSkips) {
  // Empty records are records of the index (the reader skips them), and so is one over
  // max_bytes: a range's ids are those of the full read that start inside it.
  const std::string dir = temp_dir();
  write_file(dir + "/a.txt", "a\n\nb\r\n" + std::string(50, 'x') + "\nc\n\n");
  TextOptions o;
  o.uris = {dir + "/a.txt"};
  o.max_bytes = 20;
  o.on_error = OnError::kSkip;
  auto src = make_text_source(o);
  const ShardIndex ix = src->record_index()[0];
  EXPECT_EQ(ix.offsets, (std::vector<uint64_t>{0, 2, 3, 6, 57, 59, 60}));
  const auto full = drain(src);
  for (int64_t b = 0; b <= ix.records; ++b) {
    for (int64_t e = b; e <= ix.records; ++e) {
      std::vector<int64_t> want;
      for (const Example& x : full) {
        const uint64_t at = static_cast<uint64_t>(x.id());
        if (at >= ix.offsets[static_cast<size_t>(b)] && at < ix.offsets[static_cast<size_t>(e)])
          want.push_back(x.id());
      }
      auto got =
          testing::ids(drain(src->record_range({0, b, e, ix.offsets[static_cast<size_t>(b)]})));
      EXPECT_EQ(got, want) << "[" << b << ", " << e << ")";
    }
  }
}

TEST(RecordRange, BadRangesAreRefusedNamingTheFileAndTheRecord) {
  const std::string dir = temp_dir();
  const auto offsets = write_tfrecord(dir + "/a.tfrecord", {10, 20, 30});
  auto src = tfrecord_source({dir + "/a.tfrecord"});
  EXPECT_CONTAINS(error_of([&] {
                    src->record_range({1, 0, 1, 0});
                  }),
                  "shard 1 of a source of 1 shard");
  EXPECT_CONTAINS(error_of([&] {
                    src->record_range({0, 2, 1, offsets[2]});
                  }),
                  "records [2, 1) of shard 0");
  EXPECT_CONTAINS(error_of([&] {
                    src->record_range({0, 1, 2, 0});
                  }),
                  "record 1 cannot start at byte 0");
  // The file has fewer records than the range: it changed since it was indexed.
  std::string err = error_of([&] { drain(src->record_range({0, 1, 5, offsets[1]})); });
  EXPECT_CONTAINS(err, "a.tfrecord");
  EXPECT_CONTAINS(err, "has 3 records");
  EXPECT_CONTAINS(err, "[1, 5)");
  // A random-access source knows its count.
  EXPECT_CONTAINS(error_of([&] {
                    make_range({10, 1})->record_range({0, 3, 11, 0});
                  }),
                  "records [3, 11) of shard 0: it has 10");
}

}  // namespace
}  // namespace dataecho
