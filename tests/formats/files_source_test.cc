// The `files` source on real folders made by the tests: ImageFolder order and labels as
// torchvision gives them, extension filter, globs, CSV and TSV lists, bad files under
// each on_error policy, a changed listing refused on restore, save/restore, sharding.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "dataecho/formats/files.h"
#include "dataecho/spec/pipeline_def.h"
#include "test_util.h"

namespace dataecho {
namespace {

namespace fs = std::filesystem;
using testing::error_of;
using testing::ids;
using testing::run;
using testing::values;

void write(const std::string& path, const std::string& bytes) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string bytes_of(const Example& e) { return std::string(e.get("image").bytes()); }

FilesOptions folder(const std::string& root) {
  FilesOptions o;
  o.root = root;
  return o;
}

std::string spec(nlohmann::json source, nlohmann::json stages = nlohmann::json::array()) {
  source["kind"] = "files";
  return nlohmann::json{{"source", source}, {"stages", stages}}.dump();
}

// A tree whose order tests torchvision's rules: classes by bytes ("Cat" < "a-b" < "a_b"
// < "cat"), each class folder walked as sorted(os.walk()) ("sub" before "sub-b", the
// folder's own files first), extensions matched case-insensitively.
class FilesTree : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = testing::temp_dir() + "/train";
    for (const char* f : {"cat/x.jpg", "cat/sub/a.jpg", "cat/sub-b/c.JPG", "cat/readme.txt",
                          "Cat/one.png", "a_b/q.jpeg", "a-b/p.webp", "dog/z.bmp", "dog/d/y.tif"})
      write(root_ + "/" + f, std::string("bytes of ") + f);
    write(root_ + "/loose.jpg", "not in a class");
  }
  std::string root_;
};

TEST_F(FilesTree, ImageFolderOrderLabelsAndBytesAreTorchvisions) {
  const std::vector<std::string> classes = {"Cat", "a-b", "a_b", "cat", "dog"};
  EXPECT_EQ(image_folder_classes(root_), classes);
  auto idx = class_to_idx(root_);
  EXPECT_EQ(idx.at("cat"), 3);
  EXPECT_EQ(idx.size(), 5u);
  auto out = run(spec({{"root", root_}}));
  const std::vector<std::string> want = {"Cat/one.png", "a-b/p.webp",    "a_b/q.jpeg",
                                         "cat/x.jpg",   "cat/sub/a.jpg", "cat/sub-b/c.JPG",
                                         "dog/z.bmp",   "dog/d/y.tif"};
  ASSERT_EQ(out.size(), want.size());
  EXPECT_EQ(ids(out), testing::iota(8));
  EXPECT_EQ(values(out, "label"), (std::vector<int64_t>{0, 1, 2, 3, 3, 3, 4, 4}));
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(bytes_of(out[i]), "bytes of " + want[i]) << i;
    EXPECT_EQ(out[i].get("image").dtype(), DType::kUInt8);
    EXPECT_EQ(out[i].get("image").shape().size(), 1u);
  }
  auto listing = FileListing::make(folder(root_));
  EXPECT_EQ(listing->path(4), "cat/sub/a.jpg");
  EXPECT_EQ(listing->file_size(4),
            static_cast<int64_t>(std::string("bytes of cat/sub/a.jpg").size()));
}

TEST_F(FilesTree, ExtensionFilterAndEmptyClasses) {
  auto txt = run(spec({{"root", root_}, {"extensions", {"TXT"}}, {"allow_empty", true}}));
  ASSERT_EQ(txt.size(), 1u);
  EXPECT_EQ(bytes_of(txt[0]), "bytes of cat/readme.txt");
  EXPECT_EQ(values(txt, "label"), std::vector<int64_t>{3});
  // torchvision refuses a class without files; the message names it.
  std::string e = error_of([&] {
    testing::build(spec({{"root", root_}, {"extensions", {".png"}}}));
  });
  EXPECT_NE(e.find("a-b, a_b, cat, dog"), std::string::npos) << e;
  EXPECT_EQ(run(spec({{"root", root_}, {"extensions", nlohmann::json::array()}})).size(), 9u);
}

TEST_F(FilesTree, GlobAndBracesWithoutLabels) {
  auto out = run(spec({{"uri", {root_ + "/cat/*.jpg", root_ + "/{dog/z.bmp,Cat/one.png}"}}}));
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(bytes_of(out[0]), "bytes of cat/x.jpg");
  EXPECT_EQ(bytes_of(out[1]), "bytes of dog/z.bmp");
  EXPECT_EQ(bytes_of(out[2]), "bytes of Cat/one.png");
  EXPECT_FALSE(out[0].find("label"));
  EXPECT_EQ(ids(out), testing::iota(3));
}

TEST_F(FilesTree, CsvAndTsvListsRelativePathsAndFurtherColumns) {
  const std::string lists = fs::path(root_).parent_path().string() + "/lists";
  write(lists + "/train.csv",
        "path,label,caption,split\n"
        "../train/cat/x.jpg,7,\"a cat, sitting\",train\r\n"
        "\n"
        "../train/dog/z.bmp, 2 ,dog,val\n");
  auto out = run(spec({{"list", lists + "/train.csv"}}));
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(bytes_of(out[1]), "bytes of dog/z.bmp");
  EXPECT_EQ(values(out, "label"), (std::vector<int64_t>{7, 2}));
  const Tensor& caption = out[0].get("caption");
  EXPECT_EQ(caption.bytes(), "a cat, sitting");
  EXPECT_TRUE(out[1].find("split"));
  // TSV, no header (its second cell is an integer), paths relative to "base".
  write(lists + "/val.tsv", "cat/sub/a.jpg\t1\tx y\na_b/q.jpeg\t0\tz\n");
  auto tsv = run(spec({{"list", lists + "/val.tsv"}, {"base", root_}}));
  ASSERT_EQ(tsv.size(), 2u);
  EXPECT_EQ(bytes_of(tsv[0]), "bytes of cat/sub/a.jpg");
  EXPECT_TRUE(tsv[0].find("column2"));
  write(lists + "/bad.csv", "a.jpg,1\nb.jpg,one\n");
  std::string e = error_of([&] { testing::build(spec({{"list", lists + "/bad.csv"}})); });
  EXPECT_NE(e.find("bad.csv line 2"), std::string::npos) << e;
  EXPECT_NE(e.find("'one' is not an integer"), std::string::npos) << e;
}

TEST_F(FilesTree, MissingAndResizedFilesFollowOnError) {
  const std::string list = root_ + "/../list.csv";
  write(list, "train/cat/x.jpg,0\ntrain/gone.jpg,1\ntrain/dog/z.bmp,2\n");
  std::string e = error_of([&] { run(spec({{"list", list}})); });
  EXPECT_NE(e.find("gone.jpg (file 1)"), std::string::npos) << e;
  EXPECT_NE(e.find("missing"), std::string::npos) << e;
  auto skip = testing::build(spec({{"list", list}, {"on_error", "skip"}}));
  auto skipped = testing::drain(*skip);
  EXPECT_EQ(ids(skipped), (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(skip->stats().nodes()[0]->counters().at("skipped"), 1);
  auto echo = run(spec({{"list", list}, {"on_error", "echo"}}));
  EXPECT_EQ(ids(echo), (std::vector<int64_t>{0, 0, 2}));
  EXPECT_EQ(testing::echoes(echo), (std::vector<int32_t>{0, 1, 0}));
  // A file rewritten with another size after the listing, with reads in flight.
  auto p = testing::build(spec({{"root", root_}, {"reads_in_flight", 4}}));
  write(root_ + "/dog/z.bmp", "shorter");
  e = error_of([&] { testing::drain(*p); });
  EXPECT_NE(e.find("dog/z.bmp (file 6)"), std::string::npos) << e;
  EXPECT_NE(e.find("7 bytes"), std::string::npos) << e;
}

TEST_F(FilesTree, SaveRestoreContinuesAndAChangedListingIsRefused) {
  for (int reads : {1, 3})
    testing::expect_save_restore_identical(spec({{"root", root_}, {"reads_in_flight", reads}}),
                                           {0, 1, 4, 7, 8});
  const std::string s = spec({{"root", root_}});
  auto p = testing::build(s);
  testing::drain(*p, 3);
  const std::string state = p->save();
  EXPECT_LT(state.size(), 200u);  // a hash and a position, not the paths
  write(root_ + "/dog/new.jpg", "x");
  auto q = testing::build(s);
  std::string e = error_of([&] { q->restore(state); });
  EXPECT_NE(e.find("the listing changed since the state was saved: 9 files now"), std::string::npos)
      << e;
}

TEST_F(FilesTree, ShardSplitsTheListingWithoutOverlap) {
  std::set<int64_t> seen;
  for (int i = 0; i < 3; ++i) {
    auto part = ids(run(spec({{"root", root_}, {"reads_in_flight", 2}},
                             {{{"op", "shard"}, {"num_shards", 3}, {"index", i}}})));
    for (size_t k = 0; k < part.size(); ++k) {
      EXPECT_EQ(part[k], i + 3 * static_cast<int64_t>(k));
      EXPECT_TRUE(seen.insert(part[k]).second) << part[k];
    }
  }
  EXPECT_EQ(seen.size(), 8u);
  // A rank's share split again among its workers: every 4th file from 1 + 2 = 3.
  auto nested =
      ids(run(spec({{"root", root_}}, {{{"op", "shard"}, {"num_shards", 2}, {"index", 1}},
                                       {{"op", "shard"}, {"num_shards", 2}, {"index", 1}}})));
  EXPECT_EQ(nested, (std::vector<int64_t>{3, 7}));
  testing::expect_save_restore_identical(
      spec({{"root", root_}}, {{{"op", "shard"}, {"num_shards", 2}, {"index", 0}}}), {1, 3});
  auto mixed = ids(run(spec({{"root", root_}}, {{{"op", "interleave"}, {"cycle", 2}}})));
  EXPECT_EQ(std::set<int64_t>(mixed.begin(), mixed.end()).size(), 8u);
}

TEST(FilesSource, ListingHoldsUnder100BytesPerFileAndTheCppBuilderWorks) {
  const std::string root = testing::temp_dir() + "/many";
  for (int c = 0; c < 4; ++c)
    for (int i = 0; i < 500; ++i)
      write(root + "/n0144076" + std::to_string(c) + "/n0144076" + std::to_string(c) + "_" +
                std::to_string(10000 + i) + ".JPEG",
            "");
  auto l = FileListing::make(folder(root));
  ASSERT_EQ(l->size(), 2000u);
  EXPECT_LT(l->memory_bytes() / l->size(), 100u) << l->memory_bytes();
  auto p = files({{"root", root}, {"reads_in_flight", 16}}).batch({.size = 100}).build();
  EXPECT_EQ(testing::drain(*p).size(), 20u);
}

}  // namespace
}  // namespace dataecho
