// The `text` source over real files written here: lines, documents, JSON Lines, gzip and
// a dictzip-style header, ids, shards, save/restore and bad input.
#include "dataecho/formats/text.h"

#include <fstream>

#include <gtest/gtest.h>

#include "dataecho/formats/tfrecord.h"
#include "dataecho/spec/pipeline_def.h"
#include "test_util.h"

namespace dataecho::testing {
namespace {

std::string write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

std::vector<std::string> texts(const std::vector<Example>& v, const std::string& field = "text") {
  std::vector<std::string> out;
  for (const auto& e : v) out.emplace_back(e.get(field).bytes());
  return out;
}

std::string spec(const std::vector<std::string>& uris, nlohmann::json source = {},
                 nlohmann::json stages = nlohmann::json::array()) {
  if (source.is_null()) source = nlohmann::json::object();
  source["kind"] = "text";
  source["uri"] = uris;
  return nlohmann::json{{"source", source}, {"stages", stages}}.dump();
}

TEST(Text, LinesWithOffsetsAsIds) {
  const std::string dir = temp_dir();
  write_file(dir + "/a.txt", "one\r\ntwo\n\nthree");
  write_file(dir + "/b.txt", "");
  write_file(dir + "/c.txt", "four\n");
  auto out = run(spec({dir + "/{a,b,c}.txt"}));
  EXPECT_EQ(texts(out), (std::vector<std::string>{"one", "two", "three", "four"}));
  EXPECT_EQ(ids(out), (std::vector<int64_t>{0, 5, 10, file_record_id(2, 0)}));
  EXPECT_EQ(out[0].get("text").dtype(), DType::kUInt8);
  out = run(spec({dir + "/a.txt"}, {{"keep_empty", true}}));
  EXPECT_EQ(texts(out), (std::vector<std::string>{"one", "two", "", "three"}));
}

TEST(Text, DocumentsGzipAndDictzipReadAlike) {
  const std::string dir = temp_dir();
  std::string body;
  // About 330 KiB: records cross the 64 KiB read chunks and the first read that tells
  // gzip from plain data.
  for (int i = 0; i < 12000; ++i) body += "doc " + std::to_string(i) + " line a\nline b\n\n";
  write_file(dir + "/plain.txt", body);
  write_gzip(dir + "/g.txt.gz", body, false);
  write_gzip(dir + "/d.txt.dz", body, true);
  nlohmann::json src = {{"separator", "\n\n"}};
  auto plain = run(spec({dir + "/plain.txt"}, src));
  ASSERT_EQ(plain.size(), 12000u);
  const auto plain_texts = texts(plain);
  for (int i = 0; i < 12000; ++i)
    ASSERT_EQ(plain_texts[i], "doc " + std::to_string(i) + " line a\nline b") << i;
  for (const char* f : {"/g.txt.gz", "/d.txt.dz"}) {
    auto other = run(spec({dir + f}, src));
    EXPECT_EQ(texts(other), plain_texts) << f;
    EXPECT_EQ(ids(other), ids(plain)) << f;
  }
}

TEST(Text, SaveRestoreMidFileAcrossShardsPlainAndGzip) {
  const std::string dir = temp_dir();
  std::string body;
  for (int i = 0; i < 200; ++i) body += std::string(static_cast<size_t>(i % 17), 'x') + "\n";
  write_file(dir + "/0.txt", body);
  write_gzip(dir + "/1.txt.gz", body, false);
  write_file(dir + "/2.txt", body);
  expect_save_restore_identical(spec({dir + "/0.txt", dir + "/1.txt.gz", dir + "/2.txt"}),
                                {1, 150, 250, 400});
  expect_save_restore_identical(
      spec({dir + "/0.txt", dir + "/1.txt.gz", dir + "/2.txt"}, {},
           nlohmann::json::array({{{"op", "interleave"}, {"cycle", 2}, {"parallelism", 1}}})),
      {3, 333});
}

TEST(Text, JsonLinesFieldsAndBadRecords) {
  const std::string dir = temp_dir();
  write_file(dir + "/a.jsonl",
             "{\"text\": \"h\\u00e9llo\", \"n\": 3, \"w\": [1, 2]}\n"
             "not json\n"
             "[1]\n"
             "{\"n\": null}\n"
             "{\"text\": \"ok\", \"n\": 5, \"w\": []}\n");
  nlohmann::json src = {{"format", "jsonl"}, {"fields", {"text", "n"}}};
  std::string msg = error_of([&] { run(spec({dir + "/a.jsonl"}, src)); });
  EXPECT_NE(msg.find("not JSON"), std::string::npos) << msg;
  EXPECT_NE(msg.find("a.jsonl record 1 at byte 44"), std::string::npos) << msg;
  src["on_error"] = "skip";
  auto out = run(spec({dir + "/a.jsonl"}, src));
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(texts(out)[0], "h\xc3\xa9llo");
  EXPECT_EQ(out[1].get("n").item<int64_t>(), 5);
  src.erase("fields");
  src["on_error"] = "echo";
  out = run(spec({dir + "/a.jsonl"}, src));
  ASSERT_EQ(out.size(), 5u) << "three bad records, each replaced by the last good one";
  EXPECT_EQ(out[1].echo(), 1);
  EXPECT_EQ(out[3].echo(), 3);
  EXPECT_EQ(out[0].get("w").shape(), (Shape{2}));
}

TEST(Text, LongLinesAndInvalidUtf8FollowOnError) {
  const std::string dir = temp_dir();
  write_file(dir + "/a.txt",
             "short\n" + std::string(5000, 'y') + "\nbad \xc3\x28 byte\nend\xed\xa0\x80\nlast");
  nlohmann::json src = {{"max_bytes", 100}};
  std::string msg = error_of([&] { run(spec({dir + "/a.txt"}, src)); });
  EXPECT_NE(msg.find("longer than max_bytes (100)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("record 1 at byte 6"), std::string::npos) << msg;
  src["on_error"] = "skip";
  auto p = build(spec({dir + "/a.txt"}, src));
  EXPECT_EQ(texts(drain(*p)), (std::vector<std::string>{"short", "last"}));
  EXPECT_EQ(p->stats().nodes().front()->counters()["skipped"], 3);
  src = {{"max_bytes", 100000}};
  msg = error_of([&] { run(spec({dir + "/a.txt"}, src)); });
  EXPECT_NE(msg.find("invalid UTF-8 at byte 4 of the record"), std::string::npos) << msg;
  src["utf8"] = false;
  EXPECT_EQ(run(spec({dir + "/a.txt"}, src)).size(), 5u);
}

TEST(Text, Utf8Validator) {
  size_t at = 99;
  EXPECT_TRUE(valid_utf8("plain ascii text, longer than eight bytes"));
  EXPECT_TRUE(valid_utf8("\xf0\x9f\x98\x80 \xe2\x82\xac \xc3\xa9"));
  EXPECT_FALSE(valid_utf8("abcdefgh\xc0\xaf", &at));  // overlong '/'
  EXPECT_EQ(at, 8u);
  EXPECT_FALSE(valid_utf8("\xf4\x90\x80\x80"));  // past U+10FFFF
  EXPECT_FALSE(valid_utf8("\xe2\x82"));          // cut short
}

TEST(Text, SpecErrorsAndTheBuilder) {
  const std::string dir = temp_dir();
  write_file(dir + "/a.txt", "x\n");
  std::string msg = error_of([&] { run(spec({dir + "/a.txt"}, {{"fields", {"a"}}})); });
  EXPECT_NE(msg.find("$.source.fields"), std::string::npos) << msg;
  msg = error_of([&] { run(spec({dir + "/none-*.txt"})); });
  EXPECT_NE(msg.find("none-*.txt"), std::string::npos) << msg;
  auto p = text({dir + "/a.txt"}).padded_batch({.size = 4}).build();
  auto out = drain(*p);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].get("text_length").data<int32_t>()[0], 1);

  // The typed stages write the spec's options, and read back as the same definition.
  auto def = text({dir + "/a.txt"});
  def.map("tokenize")
      .pack({.length = 3, .pad_id = -1})
      .bucket({.boundaries = {2}, .batch_sizes = {4, 4}})
      .unbatch()
      .padded_batch({.size = 2,
                     .fields = {{"tokens", {{"length", 8}}}, {"ids", {{"value", -1}}}},
                     .lengths = false});
  EXPECT_EQ(PipelineDef::from_json(def.to_json()), def);
  EXPECT_EQ(def.to_json()["stages"][1],
            (nlohmann::json{{"op", "pack"}, {"length", 3}, {"pad_id", -1}}));
  out = drain(*def.build());
  ASSERT_EQ(out.size(), 1u);
  const Tensor& tokens = out[0].get("tokens");
  EXPECT_EQ(tokens.shape(), (Shape{1, 8}));
  EXPECT_EQ(std::vector<int32_t>(tokens.data<int32_t>(), tokens.data<int32_t>() + 8),
            (std::vector<int32_t>{120, 256, -1, 0, 0, 0, 0, 0}));
  EXPECT_EQ(out[0].find("tokens_length"), nullptr);
}

}  // namespace
}  // namespace dataecho::testing
