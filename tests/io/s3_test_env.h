// ScopedAwsEnv: a test's AWS environment. Clears every AWS_* variable and points HOME at a
// fresh folder (so no ~/.aws of the machine is read); restores all of it when destroyed.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <map>
#include <string>

#include "test_util.h"

extern char** environ;

namespace dataecho::testing {

class ScopedAwsEnv {
 public:
  ScopedAwsEnv() : home_(temp_dir()) {
    for (char** e = environ; *e; ++e) {
      const std::string entry = *e;
      const size_t eq = entry.find('=');
      const std::string name = entry.substr(0, eq);
      if (name.rfind("AWS_", 0) == 0 || name == "HOME") saved_[name] = entry.substr(eq + 1);
    }
    for (const auto& [name, value] : saved_) unsetenv(name.c_str());
    setenv("HOME", home_.c_str(), 1);
  }
  ~ScopedAwsEnv() {
    for (char** e = environ; *e;) {
      const std::string entry = *e;
      const std::string name = entry.substr(0, entry.find('='));
      if (name.rfind("AWS_", 0) == 0 || name == "HOME") {
        unsetenv(name.c_str());  // environ shifts: look at the same slot again
        continue;
      }
      ++e;
    }
    for (const auto& [name, value] : saved_) setenv(name.c_str(), value.c_str(), 1);
  }
  ScopedAwsEnv(const ScopedAwsEnv&) = delete;
  ScopedAwsEnv& operator=(const ScopedAwsEnv&) = delete;

  void set(const char* name, const std::string& value) { setenv(name, value.c_str(), 1); }
  // The fresh HOME ($HOME/.aws/credentials and $HOME/.aws/config are the defaults).
  const std::string& home() const { return home_; }

 private:
  std::string home_;
  std::map<std::string, std::string> saved_;
};

}  // namespace dataecho::testing
