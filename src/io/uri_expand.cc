// expand_uris: the `uri` list of a spec turned into an ordered list of shards.
// Brace groups expand first (`{00000..00007}` numeric ranges keep the zero padding of
// their bounds, `{a,b}` lists), then local entries with glob characters are matched
// with glob(3) and sorted bytewise. http(s) URLs only get their braces expanded; an
// s3:// entry with glob characters, or ending '/', lists the bucket (s3_stream.h's
// expand_pattern; the names of one entry's braces several at once: expand_patterns). An entry
// `@MANIFEST` (a path, an http(s) or s3:// URL, taken literally) is read through open_stream: each
// line that is neither empty nor a `#` comment names one shard, taken literally (no braces, no
// globs); relative lines are relative to the manifest's own folder (or URL directory). Errors: a
// dataecho::Error (stage "uri") naming the pattern that matched nothing or the malformed brace
// group, or the manifest and line.
#include <glob.h>
#include <sys/stat.h>

#include <algorithm>
#include <iterator>

#include "dataecho/core/error.h"
#include "dataecho/io/byte_stream.h"
#include "s3_stream.h"

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

// Refuses a local path that is missing or a directory.
void check_local_file(const std::string& path, const std::string& pattern) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    uri_error(ErrorCode::kNotFound, pattern,
              path == pattern ? "no such file" : "no such file: " + path);
  }
  if (S_ISDIR(st.st_mode))
    uri_error(ErrorCode::kInvalidArgument, pattern, "is a directory: " + path);
}

constexpr size_t kMaxManifestBytes = 64 << 20;

std::string read_manifest(const std::string& location, const std::string& pattern,
                          const StreamOptions& options) {
  std::string text;
  try {
    StreamOptions o = options;
    o.cache_dir.clear();  // a manifest is read afresh: it names what the shards are
    auto stream = open_stream(location, o);
    char buf[64 << 10];
    while (size_t n = stream->read(buf, sizeof(buf))) {
      text.append(buf, n);
      if (text.size() > kMaxManifestBytes) {
        uri_error(ErrorCode::kInvalidArgument, pattern,
                  "manifest is larger than " + std::to_string(kMaxManifestBytes) + " bytes");
      }
    }
  } catch (const Error& e) {
    if (e.stage() == "uri") throw;
    uri_error(e.code(), pattern, std::string("cannot read manifest: ") + e.what());
  }
  return text;
}

// The directory of a manifest, with its trailing slash ("http://h/d/m.txt?x" ->
// "http://h/d/", "http://h" -> "http://h/", "/a/m.txt" -> "/a/", "m.txt" -> "").
std::string manifest_dir(std::string s) {
  if (is_remote_uri(s)) {
    s = s.substr(0, s.find_first_of("?#"));
    if (s.find('/', s.find("//") + 2) == std::string::npos) return s + "/";
  }
  size_t slash = s.rfind('/');
  return slash == std::string::npos ? "" : s.substr(0, slash + 1);
}

// "http://h:1/d/" -> "http://h:1"
std::string url_origin(const std::string& url) {
  size_t host = url.find("//") + 2;
  size_t path = url.find('/', host);
  return path == std::string::npos ? url : url.substr(0, path);
}

void expand_manifest(const std::string& pattern, const std::string& base_dir,
                     const StreamOptions& options, std::vector<std::string>& result) {
  std::string name = pattern.substr(1);
  if (name.empty())
    uri_error(ErrorCode::kInvalidArgument, pattern, "'@' needs a manifest path or URL");
  bool http = is_remote_uri(name);
  std::string location = http ? name : local_path(name, base_dir);
  if (!http) check_local_file(location, pattern);
  std::string text = read_manifest(location, pattern, options);
  std::string dir = manifest_dir(location);
  size_t count = 0, line_no = 0, start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    start = end + 1;
    ++line_no;
    size_t a = line.find_first_not_of(" \t\r");
    if (a == std::string::npos || line[a] == '#') continue;
    line = line.substr(a, line.find_last_not_of(" \t\r") + 1 - a);
    std::string where = pattern + " line " + std::to_string(line_no);
    std::string uri;
    if (is_remote_uri(line)) {
      uri = line;
    } else if (line.rfind("file://", 0) == 0) {
      uri = line.substr(7);
    } else if (http) {
      uri = line[0] == '/' ? url_origin(dir) + line : dir + line;
    } else {
      uri = line[0] == '/' ? line : dir + line;
    }
    if (!is_remote_uri(uri)) check_local_file(uri, where);
    result.push_back(uri);
    if (++count > kMaxExpansion) {
      uri_error(ErrorCode::kInvalidArgument, pattern,
                "manifest lists more than " + std::to_string(kMaxExpansion) + " shards");
    }
  }
  if (count == 0) uri_error(ErrorCode::kNotFound, pattern, "manifest lists no shard");
}

// The names of one s3:// pattern's braces: a key taken as given, or (a glob, a name ending
// '/') the keys listed, the listings made at once (s3::expand_patterns), kept in order.
void expand_s3_names(const std::vector<std::string>& names, const StreamOptions& options,
                     std::vector<std::string>& result) {
  const auto listed = [](const std::string& name) {
    return has_glob_chars(name) || name.back() == '/';
  };
  std::vector<std::string> patterns;
  std::copy_if(names.begin(), names.end(), std::back_inserter(patterns), listed);
  const std::vector<std::vector<std::string>> keys = s3::expand_patterns(patterns, options);
  size_t next = 0;
  for (const auto& name : names) {
    if (!listed(name)) {
      result.push_back(name);
      continue;
    }
    result.insert(result.end(), keys[next].begin(), keys[next].end());
    ++next;
  }
}

}  // namespace

std::vector<std::string> expand_uris(const std::vector<std::string>& patterns,
                                     const std::string& base_dir, const StreamOptions& options) {
  std::vector<std::string> result;
  for (const auto& pattern : patterns) {
    if (pattern.empty()) uri_error(ErrorCode::kInvalidArgument, "\"\"", "empty uri");
    if (pattern[0] == '@') {
      expand_manifest(pattern, base_dir, options, result);
      continue;
    }
    std::vector<std::string> names;
    expand_braces(pattern, pattern, names);
    if (is_s3_uri(pattern)) {
      expand_s3_names(names, options, result);
      continue;
    }
    if (is_http_uri(pattern)) {
      result.insert(result.end(), names.begin(), names.end());
      continue;
    }
    for (const auto& name : names) {
      std::string path = local_path(name, base_dir);
      if (!has_glob_chars(path)) {
        check_local_file(path, pattern);
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
