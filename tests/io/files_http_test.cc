// The `files` source over HTTP (a real nginx): a CSV list served with the files, its
// relative paths resolved against the list's URL, read with reads in flight; a file the
// server does not have follows on_error with its URL in the message.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "nginx_server.h"
#include "test_util.h"

namespace dataecho {
namespace {

TEST(FilesHttp, ListOverHttpReadsWhatTheLocalListReads) {
  const std::string dir = testing::temp_dir();
  std::filesystem::create_directories(dir + "/img/a");
  std::string list = "path,label\n";
  for (int i = 0; i < 40; ++i) {
    const std::string name = "img/a/" + std::to_string(i) + ".jpg";
    std::ofstream(dir + "/" + name, std::ios::binary)
        << std::string(100 + 37 * i, char('a' + i % 26));
    list += name + "," + std::to_string(i % 3) + "\n";
  }
  std::ofstream(dir + "/train.csv") << list;
  std::ofstream(dir + "/missing.csv") << "img/a/0.jpg,0\nimg/a/nope.jpg,1\nimg/a/2.jpg,2\n";
  testing::NginxServer nginx;
  nginx.start(dir);
  auto spec = [](const std::string& list, const char* on_error) {
    return nlohmann::json{
        {"source",
         {{"kind", "files"}, {"list", list}, {"reads_in_flight", 6}, {"on_error", on_error}}}}
        .dump();
  };
  auto local = testing::run(spec(dir + "/train.csv", "fail"));
  auto remote = testing::run(spec(nginx.url("train.csv"), "fail"));
  ASSERT_EQ(local.size(), 40u);
  ASSERT_EQ(remote.size(), local.size());
  for (size_t i = 0; i < local.size(); ++i) {
    EXPECT_EQ(remote[i].id(), local[i].id());
    EXPECT_EQ(remote[i].get("image").bytes(), local[i].get("image").bytes()) << i;
    EXPECT_EQ(remote[i].get("label").item<int64_t>(), static_cast<int64_t>(i % 3));
  }
  std::string e = testing::error_of([&] { testing::run(spec(nginx.url("missing.csv"), "fail")); });
  EXPECT_NE(e.find(nginx.url("img/a/nope.jpg") + " (file 1)"), std::string::npos) << e;
  EXPECT_EQ(testing::ids(testing::run(spec(nginx.url("missing.csv"), "skip"))),
            (std::vector<int64_t>{0, 2}));
}

}  // namespace
}  // namespace dataecho
