// The `text` source over HTTP (a real nginx): the same records and ids as the local
// files, plain and gzip, and a state saved mid-file restored over HTTP (a Range request
// for the plain file, a re-read for the gzip one).
#include <zlib.h>

#include <fstream>

#include <gtest/gtest.h>

#include "dataecho/core/example_json.h"
#include "nginx_server.h"
#include "test_util.h"

namespace dataecho {
namespace {

std::string spec(const std::vector<std::string>& uris) {
  return nlohmann::json{{"source", {{"kind", "text"}, {"uri", uris}}},
                        {"stages", nlohmann::json::array({{{"op", "map"}, {"fn", "tokenize"}}})}}
      .dump();
}

std::vector<std::string> dump(const std::vector<Example>& v) {
  std::vector<std::string> out;
  for (const auto& e : v) out.push_back(example_to_json(e, true).dump());
  return out;
}

TEST(TextHttp, SameAsLocalAndRestoredMidFile) {
  const std::string dir = testing::temp_dir();
  std::string body;
  for (int i = 0; i < 3000; ++i) body += "line " + std::to_string(i * 7919 % 1000) + "\n";
  std::ofstream(dir + "/a.txt") << body;
  gzFile gz = gzopen((dir + "/b.txt.gz").c_str(), "wb");
  gzwrite(gz, body.data(), static_cast<unsigned>(body.size()));
  gzclose(gz);
  testing::NginxServer nginx;
  nginx.start(dir);
  const auto local = dump(testing::run(spec({dir + "/a.txt", dir + "/b.txt.gz"})));
  ASSERT_EQ(local.size(), 6000u);
  const std::string remote = spec({nginx.url("{a.txt,b.txt.gz}")});
  EXPECT_EQ(dump(testing::run(remote)), local);
  testing::expect_save_restore_identical(remote, {1500, 4500});
}

}  // namespace
}  // namespace dataecho
