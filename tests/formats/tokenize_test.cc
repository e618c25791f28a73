// Tokenizers over files written here: bytes, a character and a word vocabulary, and a
// SentencePiece model trained here with Debian's spm_train (checked against spm_encode).
#include "dataecho/formats/tokenize.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "dataecho/spec/pipeline_def.h"
#include "test_util.h"

namespace dataecho::testing {
namespace {

std::string write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

std::vector<int32_t> encode(const MapFn& fn, const std::string& text) {
  Example e(7);
  e.set("text", Tensor::from_bytes(text));
  Example out = fn(std::move(e), MapContext{});
  EXPECT_EQ(out.find("text"), nullptr);
  const Tensor& t = out.get("tokens");
  return {t.data<int32_t>(), t.data<int32_t>() + t.num_elements()};
}

TEST(Tokenize, BytesNeedNoVocabulary) {
  auto fn = make_tokenize_fn({});
  EXPECT_EQ(encode(fn, "h\xc3\xa9!"), (std::vector<int32_t>{104, 195, 169, 33, 256}));
  TokenizeOptions o;
  o.add_eos = false;
  EXPECT_EQ(encode(make_tokenize_fn(o), ""), std::vector<int32_t>{});
}

TEST(Tokenize, CharsAndWordsFromAVocabularyFile) {
  const std::string dir = temp_dir();
  write_file(dir + "/chars.txt", "<unk>\r\n</s>\na\nb\n\xc3\xa9\n");
  write_file(dir + "/words.txt", "<unk>\nthe\ncat\n</s>\n");
  TokenizeOptions o{.kind = TokenizeOptions::Kind::kChars, .vocab = dir + "/chars.txt"};
  EXPECT_EQ(encode(make_tokenize_fn(o), "ab\xc3\xa9z\xff"),
            (std::vector<int32_t>{2, 3, 4, 0, 0, 1}));
  o = {.kind = TokenizeOptions::Kind::kWords, .vocab = dir + "/words.txt", .eos_id = 9};
  EXPECT_EQ(encode(make_tokenize_fn(o), "  the cat\tsat\nthe "),
            (std::vector<int32_t>{1, 2, 0, 1, 9}));
}

TEST(Tokenize, VocabularyErrorsNameTheFile) {
  const std::string dir = temp_dir();
  write_file(dir + "/dup.txt", "<unk>\na\nb\na\n");
  write_file(dir + "/nounk.txt", "a\nb\n");
  TokenizeOptions o{.kind = TokenizeOptions::Kind::kWords, .vocab = dir + "/dup.txt"};
  std::string msg = error_of([&] { make_tokenize_fn(o); });
  EXPECT_NE(msg.find("line 4: token \"a\" is also on line 2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("dup.txt"), std::string::npos) << msg;
  o.vocab = dir + "/nounk.txt";
  msg = error_of([&] { make_tokenize_fn(o); });
  EXPECT_NE(msg.find("\"<unk>\" is not in the vocabulary"), std::string::npos) << msg;
  o.unk = "a";
  msg = error_of([&] { make_tokenize_fn(o); });
  EXPECT_NE(msg.find("no end-of-sequence id"), std::string::npos) << msg;
  o.vocab = dir + "/missing.txt";
  msg = error_of([&] { make_tokenize_fn(o); });
  EXPECT_NE(msg.find("missing.txt"), std::string::npos) << msg;
  msg = error_of([&] {
    run(R"({"source": {"kind": "range", "count": 2},
            "stages": [{"op": "map", "fn": "tokenize", "args": {"field": "value"}}]})");
  });
  EXPECT_NE(msg.find("not text"), std::string::npos) << msg;
}

bool sanitized() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return true;
#else
  return false;
#endif
}

std::string command_output(const std::string& cmd) {
  std::string out;
  FILE* f = popen(cmd.c_str(), "r");
  if (f == nullptr) return out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof(buf), f)) out.append(buf, n);
  pclose(f);
  return out;
}

TEST(Tokenize, SentencePieceModelTrainedHereMatchesSpmEncode) {
  if (sanitized()) GTEST_SKIP() << "the SentencePiece plugin needs RTLD_DEEPBIND";
  if (access("/usr/bin/spm_train", X_OK) != 0)
    GTEST_SKIP() << "Debian's sentencepiece is not installed";
  const std::string dir = temp_dir();
  std::string corpus;
  const char* words[] = {
      "the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "d\xc3\xa9j\xc3\xa0"};
  for (int i = 0; i < 400; ++i)
    corpus +=
        std::string(words[i % 9]) + " " + words[(i * 7) % 9] + " " + words[(i * 5) % 9] + "\n";
  write_file(dir + "/corpus.txt", corpus);
  const std::string train = "/usr/bin/spm_train --input=" + dir +
                            "/corpus.txt --model_prefix=" + dir +
                            "/m --vocab_size=40 --minloglevel=2 >/dev/null 2>&1";
  ASSERT_EQ(std::system(train.c_str()), 0);
  write_file(dir + "/in.txt", "the lazy fox\nd\xc3\xa9j\xc3\xa0 vu quick\n");
  auto def = text({dir + "/in.txt"});
  def.map("tokenize", {{"tokenizer", "sentencepiece"}, {"model", dir + "/m.model"}},
          {.parallelism = 2});
  auto out = drain(*def.build());
  ASSERT_EQ(out.size(), 2u);
  std::istringstream expected(command_output("/usr/bin/spm_encode --model=" + dir +
                                             "/m.model --output_format=id < " + dir + "/in.txt"));
  for (const Example& e : out) {
    std::string line;
    std::getline(expected, line);
    const Tensor& t = e.get("tokens");
    std::string got;
    for (int64_t i = 0; i + 1 < t.num_elements(); ++i) {
      if (i > 0) got += ' ';
      got += std::to_string(t.data<int32_t>()[i]);
    }
    EXPECT_EQ(got, line);
    EXPECT_EQ(t.data<int32_t>()[t.num_elements() - 1], 2) << "spm_train's </s> is id 2";
  }
  TokenizeOptions o{.kind = TokenizeOptions::Kind::kSentencePiece, .model = dir + "/none.model"};
  std::string msg = error_of([&] { make_tokenize_fn(o); });
  EXPECT_NE(msg.find("none.model"), std::string::npos) << msg;
}

}  // namespace
}  // namespace dataecho::testing
