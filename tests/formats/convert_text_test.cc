// convert_dataset with text input: lines, documents and JSON Lines (plain and gzip) to
// TFRecord and tar shards, read back by the tfrecord and tar sources exactly as the text
// source reads the input; determinism; errors naming the file and line.

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "dataecho/formats/convert.h"
#include "test_util.h"

namespace dataecho {
namespace {

namespace fs = std::filesystem;
using testing::error_of;
using testing::run;
using testing::temp_dir;
using testing::write_gzip;

std::string write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> texts(const std::vector<Example>& v) {
  std::vector<std::string> out;
  for (const auto& e : v) out.emplace_back(e.get("text").bytes());
  return out;
}

// A corpus in three files, one of them gzip: CRLF, empty lines, UTF-8, no final newline.
std::string make_corpus(const std::string& dir) {
  std::string a = "first line\r\nsecond\n\n  indented\twith tab\n";
  std::string b;
  for (int i = 0; i < 500; ++i)
    b += "line " + std::to_string(i) + std::string(static_cast<size_t>(i % 37), 'x') +
         " \xc3\xa9t\xc3\xa9\n";
  write_file(dir + "/part-0.txt", a);
  write_gzip(dir + "/part-1.txt.gz", b);
  write_file(dir + "/part-2.txt", "\xe6\x97\xa5\xe6\x9c\xac\nlast, no newline");
  return dir + "/part-*";
}

ConvertOptions text_options(const std::string& glob, const std::string& to, int shards) {
  ConvertOptions o;
  o.text = {glob};
  o.to = to;
  o.shards = shards;
  o.out_dir = temp_dir() + "/out";
  o.name = "corpus";
  return o;
}

std::vector<std::string> text_source(const std::string& glob, const std::string& extra = "") {
  return texts(run(R"({"source": {"kind": "text", "uri": ")" + glob + "\"" + extra + "}}"));
}

TEST(ConvertText, LinesToTfRecordShardsRoundTrip) {
  const std::string dir = temp_dir();
  const std::string glob = make_corpus(dir);
  auto o = text_options(glob, "tfrecord", 3);
  ConvertSummary s = convert_dataset(o);
  const auto want = text_source(glob);
  ASSERT_EQ(want.size(), 505u);  // 4 + 500 + 2 minus the empty line
  EXPECT_EQ(s.records, 505);
  EXPECT_EQ(s.files, 3);
  ASSERT_TRUE(fs::exists(o.out_dir + "/corpus-00002-of-00003.tfrecord"));
  int64_t bytes = 0;
  for (auto& f : fs::directory_iterator(o.out_dir)) bytes += static_cast<int64_t>(f.file_size());
  EXPECT_EQ(s.bytes, bytes);
  auto got =
      run(R"({"source": {"kind": "tfrecord", "uri": ")" + o.out_dir + "/corpus-*.tfrecord\"}}");
  EXPECT_EQ(texts(got), want);
  EXPECT_EQ(got[0].get("text").dtype(), DType::kUInt8);
  EXPECT_EQ(texts(got)[0], "first line");  // the \r before \n is dropped, as the source does
}

TEST(ConvertText, LinesToTarShardsRoundTripAndAreDeterministic) {
  const std::string dir = temp_dir();
  const std::string glob = make_corpus(dir);
  auto o = text_options(glob, "tar", 2);
  convert_dataset(o);
  auto got = run(R"({"source": {"kind": "tar", "uri": ")" + o.out_dir +
                 R"(/corpus-*.tar", "fields": {"text": "txt"}}})");
  EXPECT_EQ(texts(got), text_source(glob));
  EXPECT_EQ(got[253].id(), int64_t{1} << 40);  // 505 records: 252 + 253
  // The same input gives the same bytes.
  const std::string first = read_file(o.out_dir + "/corpus-00001.tar");
  o.out_dir = temp_dir() + "/again";
  convert_dataset(o);
  EXPECT_EQ(read_file(o.out_dir + "/corpus-00001.tar"), first);
}

TEST(ConvertText, DocumentsAndJsonLinesRoundTrip) {
  const std::string dir = temp_dir();
  write_file(dir + "/docs.txt", "doc one\nline two\n\ndoc two\n\n\n\ndoc three\n");
  auto o = text_options(dir + "/docs.txt", "tfrecord", 1);
  o.separator = "\n\n";
  EXPECT_EQ(convert_dataset(o).records, 3);  // "\n\n\n\n" holds one empty record
  auto got = run(R"({"source": {"kind": "tfrecord", "uri": ")" + o.out_dir + "/*.tfrecord\"}}");
  EXPECT_EQ(texts(got), text_source(dir + "/docs.txt", R"(, "separator": "\n\n")"));

  write_file(dir + "/a.jsonl",
             "{\"body\": \"x \\u00e9 \\\"q\\\"\", \"n\": 1}\n{\"body\": \"second\\nline\"}\n");
  o = text_options(dir + "/a.jsonl", "tar", 1);
  o.jsonl = true;
  o.field = "body";
  convert_dataset(o);
  got = run(R"({"source": {"kind": "tar", "uri": ")" + o.out_dir +
            R"(/*.tar", "fields": {"text": "txt"}}})");
  EXPECT_EQ(texts(got), (std::vector<std::string>{"x \xc3\xa9 \"q\"", "second\nline"}));
}

TEST(ConvertText, LimitKeepsTheFirstRecords) {
  const std::string dir = temp_dir();
  const std::string glob = make_corpus(dir);
  auto o = text_options(glob, "tfrecord", 2);
  o.limit = 10;
  EXPECT_EQ(convert_dataset(o).records, 10);
  auto got = run(R"({"source": {"kind": "tfrecord", "uri": ")" + o.out_dir + "/*.tfrecord\"}}");
  auto want = text_source(glob);
  want.resize(10);
  EXPECT_EQ(texts(got), want);
}

TEST(ConvertText, BadInputNamesTheFileAndLine) {
  const std::string dir = temp_dir();
  write_file(dir + "/bad.txt", "ok\nfine\n\nbad \xff byte\n");
  auto o = text_options(dir + "/bad.txt", "tfrecord", 1);
  std::string msg = error_of([&] { convert_dataset(o); });
  EXPECT_NE(msg.find("line 4: invalid UTF-8 at byte 4"), std::string::npos) << msg;
  EXPECT_NE(msg.find(dir + "/bad.txt record 3 at byte 9"), std::string::npos) << msg;
  EXPECT_FALSE(fs::exists(o.out_dir + "/corpus-00000-of-00001.tfrecord")) << "written before";

  write_file(dir + "/long.gz", "");
  write_gzip(dir + "/long.gz", "short\n" + std::string(200, 'y') + "\n");
  o = text_options(dir + "/long.gz", "tar", 1);
  o.max_bytes = 100;
  msg = error_of([&] { convert_dataset(o); });
  EXPECT_NE(msg.find("line 2: record longer than max_bytes (100)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("long.gz"), std::string::npos) << msg;

  o = text_options(dir + "/missing-*.txt", "tar", 1);
  msg = error_of([&] { convert_dataset(o); });
  EXPECT_NE(msg.find("missing-*.txt"), std::string::npos) << msg;
  o = text_options(dir + "/missing.txt", "tar", 1);
  msg = error_of([&] { convert_dataset(o); });
  EXPECT_NE(msg.find("missing.txt"), std::string::npos) << msg;

  write_file(dir + "/n.jsonl", "{\"body\": \"s\"}\n\n{\"body\": 3}\n");
  o = text_options(dir + "/n.jsonl", "tar", 1);
  o.jsonl = true;
  o.field = "body";
  msg = error_of([&] { convert_dataset(o); });
  EXPECT_NE(msg.find("line 3: key \"body\" holds int64 [], not a string"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("n.jsonl record at byte 15"), std::string::npos) << msg;

  o = text_options(dir + "/bad.txt", "dir", 1);
  msg = error_of([&] { convert_dataset(o); });
  EXPECT_NE(msg.find("tfrecord or tar"), std::string::npos) << msg;
}

}  // namespace
}  // namespace dataecho
