#include "dataecho/core/module_dir.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>

namespace fs = std::filesystem;

namespace dataecho {
namespace {

TEST(ModuleDir, IsTheFolderOfTheProgramThatHoldsTheEngine) {
  // The test program links the engine's static libraries: the engine's code is in it.
  const std::string dir = module_dir();
  ASSERT_FALSE(dir.empty());
  EXPECT_TRUE(fs::path(dir).is_absolute()) << dir;
  EXPECT_TRUE(fs::is_directory(dir)) << dir;
  EXPECT_TRUE(fs::equivalent(dir, fs::read_symlink("/proc/self/exe").parent_path())) << dir;
}

TEST(PluginPaths, TheVariableThenBesideTheEngineThenTheCompiledInPaths) {
  ::setenv("DATAECHO_TEST_PLUGIN", "/opt/x/libp.so", 1);
  const auto paths =
      plugin_paths("DATAECHO_TEST_PLUGIN", "libp.so", {"/usr/lib/p/libp.so", "/b/libp.so"});
  const std::string beside = (fs::path(module_dir()) / "libp.so").string();
  EXPECT_EQ(paths, (std::vector<std::string>{"/opt/x/libp.so", beside, "/usr/lib/p/libp.so",
                                             "/b/libp.so"}));
  // An empty variable is no path; a compiled-in path that is the one beside the engine
  // (a program run from the build folder the plugin is built in) is tried once.
  ::setenv("DATAECHO_TEST_PLUGIN", "", 1);
  EXPECT_EQ(plugin_paths("DATAECHO_TEST_PLUGIN", "libp.so", {beside, "/b/libp.so"}),
            (std::vector<std::string>{beside, "/b/libp.so"}));
  ::unsetenv("DATAECHO_TEST_PLUGIN");
  EXPECT_EQ(plugin_paths("DATAECHO_TEST_PLUGIN", "libp.so", {}), std::vector<std::string>{beside});
}

}  // namespace
}  // namespace dataecho
