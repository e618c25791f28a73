#include "dataecho/core/module_dir.h"

#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <system_error>

namespace dataecho {

namespace {

// The file of the object that holds `address`: its link map's name, or for the main
// program (whose name there is empty, and whose dladdr name is argv[0], maybe relative
// to another folder or found on PATH) the kernel's /proc/self/exe.
std::string object_file(const void* address) {
  Dl_info info{};
  link_map* map = nullptr;
  if (dladdr1(address, &info, reinterpret_cast<void**>(&map), RTLD_DL_LINKMAP) == 0) return "";
  if (map != nullptr && map->l_name != nullptr && map->l_name[0] != '\0') return map->l_name;
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(info.dli_fname != nullptr ? info.dli_fname : "") : exe.string();
}

}  // namespace

std::string module_dir() {
  const std::string file = object_file(reinterpret_cast<const void*>(&module_dir));
  if (file.empty()) return "";
  std::error_code ec;
  const auto path = std::filesystem::weakly_canonical(std::filesystem::absolute(file, ec), ec);
  return ec ? "" : path.parent_path().string();
}

std::vector<std::string> plugin_paths(const char* env_var, std::string_view file_name,
                                      std::initializer_list<std::string_view> compiled_in) {
  std::vector<std::string> paths;
  auto add = [&paths](std::string path) {
    if (!path.empty() && std::find(paths.begin(), paths.end(), path) == paths.end())
      paths.push_back(std::move(path));
  };
  if (const char* env = std::getenv(env_var); env != nullptr) add(env);
  if (const std::string dir = module_dir(); !dir.empty())
    add((std::filesystem::path(dir) / file_name).string());
  for (std::string_view path : compiled_in) add(std::string(path));
  return paths;
}

}  // namespace dataecho
