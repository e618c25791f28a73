// expand_uris: the `uri` list of a spec turned into an ordered list of shards.
// Brace groups expand first (`{00000..00007}` numeric ranges keep the zero padding of
// their bounds, `{a,b}` lists), then local entries with glob characters are matched
// with glob(3) and sorted bytewise. http(s) URLs only get their braces expanded.
// Errors: a dataecho::Error (stage "uri") naming the pattern that matched nothing or
// the malformed brace group.
#include <glob.h>
#include <sys/stat.h>

#include <algorithm>

#include "dataecho/core/error.h"
#include "dataecho/io/byte_stream.h"

namespace dataecho {
namespace {

constexpr size_t kMaxExpansion = 1 << 20;  // a typo like {0..999999999} is an error, not OOM

[[noreturn]] void uri_error(ErrorCode code, const std::string& pattern, const std::string& why) {
  throw Error(code, "uri", why, pattern);
}

bool parse_int(const std::string& s, int64_t* out) {
  if (s.empty() || s.size() > 18) return false;
  size_t i = (s[0] == '-') ? 1 : 0;
  if (i == s.size()) return false;
  int64_t v = 0;
  for (; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    v = v * 10 + (s[i] - '0');
  }
  *out = s[0] == '-' ? -v : v;
  return true;
}

// The alternatives of one brace group's body.
std::vector<std::string> brace_alternatives(const std::string& body, const std::string& pattern) {
  size_t dots = body.find("..");
  int64_t a, b;
  if (dots != std::string::npos && body.find(',') == std::string::npos) {
    std::string lo = body.substr(0, dots), hi = body.substr(dots + 2);
    if (!parse_int(lo, &a) || !parse_int(hi, &b)) {
      uri_error(ErrorCode::kInvalidArgument, pattern,
                "brace range {" + body + "} needs integer bounds like {00000..00007}");
    }
    // Zero padding as bash does it: when a bound has a leading zero, pad to the widest bound.
    auto padded = [](const std::string& s) {
      size_t i = s[0] == '-' ? 1 : 0;
      return s.size() > i + 1 && s[i] == '0';
    };
    size_t width = (padded(lo) || padded(hi)) ? std::max(lo.size(), hi.size()) : 0;
    uint64_t count = static_cast<uint64_t>(a <= b ? b - a : a - b) + 1;
    if (count > kMaxExpansion) {
      uri_error(ErrorCode::kInvalidArgument, pattern,
                "brace range {" + body + "} expands to more than " + std::to_string(kMaxExpansion) +
                    " names");
    }
    std::vector<std::string> out;
    int64_t step = a <= b ? 1 : -1;
    for (int64_t v = a;; v += step) {
      std::string digits = std::to_string(v < 0 ? -v : v);
      size_t want = width > 0 ? width - (v < 0 ? 1 : 0) : 0;
      if (digits.size() < want) digits.insert(0, want - digits.size(), '0');
      out.push_back((v < 0 ? "-" : "") + digits);
      if (v == b) break;
    }
    return out;
  }
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t comma = body.find(',', start);
    out.push_back(body.substr(start, comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (out.size() < 2) {
    uri_error(ErrorCode::kInvalidArgument, pattern,
              "brace group {" + body + "} is neither a range {a..b} nor a list {x,y}");
  }
  return out;
}

void expand_braces(const std::string& s, const std::string& pattern,
                   std::vector<std::string>& out) {
  size_t open = s.find('{');
  if (open == std::string::npos) {
    if (s.find('}') != std::string::npos) {
      uri_error(ErrorCode::kInvalidArgument, pattern, "unbalanced '}'");
    }
    out.push_back(s);
    return;
  }
  size_t close = s.find('}', open);
  if (close == std::string::npos) uri_error(ErrorCode::kInvalidArgument, pattern, "unbalanced '{'");
  std::string body = s.substr(open + 1, close - open - 1);
  if (body.find('{') != std::string::npos) {
    uri_error(ErrorCode::kInvalidArgument, pattern, "nested brace groups are not supported");
  }
  std::string head = s.substr(0, open), tail = s.substr(close + 1);
  for (const auto& alt : brace_alternatives(body, pattern)) {
    expand_braces(head + alt + tail, pattern, out);
    if (out.size() > kMaxExpansion) {
      uri_error(ErrorCode::kInvalidArgument, pattern,
                "expands to more than " + std::to_string(kMaxExpansion) + " names");
    }
  }
}

bool has_glob_chars(const std::string& s) { return s.find_first_of("*?[") != std::string::npos; }

std::string local_path(std::string p, const std::string& base_dir) {
  if (p.rfind("file://", 0) == 0) p = p.substr(7);
  if (!p.empty() && p[0] != '/' && !base_dir.empty()) {
    p = base_dir.back() == '/' ? base_dir + p : base_dir + "/" + p;
  }
  return p;
}

}  // namespace

std::vector<std::string> expand_uris(const std::vector<std::string>& patterns,
                                     const std::string& base_dir) {
  std::vector<std::string> result;
  for (const auto& pattern : patterns) {
    if (pattern.empty()) uri_error(ErrorCode::kInvalidArgument, "\"\"", "empty uri");
    std::vector<std::string> names;
    expand_braces(pattern, pattern, names);
    if (is_http_uri(pattern)) {
      result.insert(result.end(), names.begin(), names.end());
      continue;
    }
    for (const auto& name : names) {
      std::string path = local_path(name, base_dir);
      if (!has_glob_chars(path)) {
        struct stat st;
        if (::stat(path.c_str(), &st) != 0) {
          uri_error(ErrorCode::kNotFound, pattern,
                    path == pattern ? "no such file" : "no such file: " + path);
        }
        if (S_ISDIR(st.st_mode)) {
          uri_error(ErrorCode::kInvalidArgument, pattern, "is a directory: " + path);
        }
        result.push_back(path);
        continue;
      }
      glob_t g{};
      int rc = ::glob(path.c_str(), GLOB_NOSORT, nullptr, &g);
      std::vector<std::string> matches;
      if (rc == 0) {
        for (size_t i = 0; i < g.gl_pathc; ++i) {
          struct stat st;
          if (::stat(g.gl_pathv[i], &st) == 0 && !S_ISDIR(st.st_mode)) {
            matches.emplace_back(g.gl_pathv[i]);
          }
        }
      }
      ::globfree(&g);
      if (rc != 0 && rc != GLOB_NOMATCH) {
        uri_error(ErrorCode::kIo, pattern, "cannot read the directories of the glob");
      }
      if (matches.empty()) {
        uri_error(ErrorCode::kNotFound, pattern,
                  path == pattern ? "matches no file" : "matches no file (" + path + ")");
      }
      std::sort(matches.begin(), matches.end());
      result.insert(result.end(), matches.begin(), matches.end());
    }
  }
  return result;
}

}  // namespace dataecho
