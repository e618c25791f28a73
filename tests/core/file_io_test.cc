#include "dataecho/core/file_io.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "dataecho/core/error.h"
#include "test_util.h"

namespace fs = std::filesystem;

namespace dataecho {
namespace {

std::string read_back(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

size_t files_in(const std::string& dir) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

TEST(WriteFileAtomically, WritesAndReplacesLeavingNothingBeside) {
  const std::string dir = testing::temp_dir(), path = dir + "/state";
  write_file_atomically(path, std::string("first\0bytes", 11), "test");
  EXPECT_EQ(read_back(path), std::string("first\0bytes", 11));
  write_file_atomically(path, "second", "test");
  EXPECT_EQ(read_back(path), "second");
  write_file_atomically(path, "", "test");
  EXPECT_EQ(read_back(path), "");
  EXPECT_EQ(files_in(dir), 1u);
}

// A folder that does not exist: the error names the stage, the file and the reason.
TEST(WriteFileAtomically, AMissingFolderIsAnIoErrorNamingTheFile) {
  const std::string path = testing::temp_dir() + "/no/such/state";
  try {
    write_file_atomically(path, "x", "pipe");
    ADD_FAILURE() << "wrote into a missing folder";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kIo);
    EXPECT_CONTAINS(std::string(e.what()), "pipe");
    EXPECT_CONTAINS(std::string(e.what()), path);
    EXPECT_CONTAINS(std::string(e.what()), "No such file or directory");
  }
}

// The target is a folder: the rename fails, the old target stays and the file written
// beside it is removed.
TEST(WriteFileAtomically, AFailedRenameLeavesTheTargetAndRemovesTheTemporaryFile) {
  const std::string dir = testing::temp_dir(), path = dir + "/target";
  fs::create_directories(path + "/inside");
  const std::string e = testing::error_of([&] { write_file_atomically(path, "x", "test"); });
  EXPECT_CONTAINS(e, "cannot rename");
  EXPECT_CONTAINS(e, path);
  EXPECT_TRUE(fs::is_directory(path + "/inside"));
  EXPECT_EQ(files_in(dir), 1u);
}

}  // namespace
}  // namespace dataecho
