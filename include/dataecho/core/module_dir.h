// Where the engine's code lives, and where a plugin the engine loads with dlopen is looked
// for: the gRPC transport (libdataecho_grpc.so) and the SentencePiece tokenizer
// (libdataecho_sentencepiece.so) are shared objects of their own, found beside the
// engine wherever it was copied (a wheel's dataecho/ beside _core*.so, a program's
// folder) as well as at the paths the build compiled in.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace dataecho {

// The absolute folder of the shared object or executable that holds the engine's code
// (the Python extension _core*.so, the `dataecho` program, a test program), found with
// dladdr on one of the engine's own functions; "" when the system cannot tell.
std::string module_dir();

// The paths a loader tries for the plugin `file_name`, in order: $env_var (when set and
// not empty), `file_name` in module_dir(), then `compiled_in` (the installed and the
// build's paths). A path already listed is not listed again.
std::vector<std::string> plugin_paths(const char* env_var, std::string_view file_name,
                                      std::initializer_list<std::string_view> compiled_in);

}  // namespace dataecho
