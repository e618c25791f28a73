// s3_config.h: the credential chain, region, endpoint and addressing of s3:// reads.
#include "s3_config.h"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "dataecho/core/error.h"
#include "dataecho/core/redact.h"

namespace dataecho::s3 {
namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::string trim(std::string_view s) {
  size_t a = 0, b = s.size();
  while (a < b && std::isspace(static_cast<unsigned char>(s[a]))) ++a;
  while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) --b;
  return std::string(s.substr(a, b - a));
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The file a variable names, else ~/`rel`.
std::string file_path(const char* variable, const char* rel) {
  if (std::string v = env(variable); !v.empty()) return v;
  std::string home = env("HOME");
  if (home.empty())
    if (const passwd* pw = getpwuid(getuid())) home = pw->pw_dir;
  return home + "/" + rel;
}

struct LoadedFile {
  std::string path;
  bool exists = false;
  std::string problem;  // why it could not be read ("" when it was, or does not exist)
  IniFile ini;
};

LoadedFile load(const std::string& path) {
  LoadedFile f;
  f.path = path;
  std::ifstream in(path);
  if (!in) {
    if (errno != ENOENT) f.problem = std::strerror(errno);
    return f;
  }
  std::stringstream text;
  text << in.rdbuf();
  f.exists = true;
  f.ini = parse_ini(text.str(), path);
  return f;
}

const IniSection* section(const LoadedFile& f, const std::string& name) {
  const auto it = f.ini.find(name);
  return it == f.ini.end() ? nullptr : &it->second;
}

std::string get(const IniSection* s, const std::string& key) {
  if (!s) return "";
  const auto it = s->find(key);
  return it == s->end() ? "" : it->second;
}

// A profile as the two files hold it.
struct Profile {
  std::string name;
  bool named_in_spec = false;
  LoadedFile credentials_file, config_file;
  const IniSection* credentials = nullptr;  // [name] of the credentials file
  const IniSection* config = nullptr;       // [default] or [profile name] of the config file
  std::string config_label() const { return name == "default" ? "default" : "profile " + name; }
};

// How one file was looked in, for the "no credentials" error.
std::string looked_in(const LoadedFile& f, const std::string& label, const IniSection* s) {
  const std::string where = f.path + " [" + label + "]";
  if (!f.problem.empty()) return where + " (cannot read: " + f.problem + ")";
  if (!f.exists) return where + " (no such file)";
  return where + (s ? " (no keys)" : " (no such profile)");
}

[[noreturn]] void config_error(const std::string& display, const std::string& why) {
  throw Error(ErrorCode::kInvalidArgument, kStage, why, display);
}

// The keys of one file's section, when it has both; throws when it has only one.
bool keys_of(const IniSection* s, const LoadedFile& f, const std::string& label,
             const std::string& display, Credentials* out) {
  const std::string id = get(s, "aws_access_key_id"), secret = get(s, "aws_secret_access_key");
  if (id.empty() && secret.empty()) return false;
  if (id.empty() || secret.empty())
    config_error(display, f.path + " [" + label + "] has " +
                              (id.empty() ? "aws_secret_access_key but no aws_access_key_id"
                                          : "aws_access_key_id but no aws_secret_access_key"));
  std::string token = get(s, "aws_session_token");
  if (token.empty()) token = get(s, "aws_security_token");
  *out = {id, secret, token};
  return true;
}

// A profile that gets its credentials by a role, SSO, a process or a web identity.
void refuse_indirect_credentials(const Profile& p, const std::string& display) {
  for (const IniSection* s : {p.credentials, p.config}) {
    for (const char* key : {"role_arn", "credential_process", "web_identity_token_file",
                            "sso_session", "sso_start_url"}) {
      if (get(s, key).empty()) continue;
      config_error(display, "the profile '" + p.name + "' gets its credentials through " + key +
                                ", which dataecho does not run: export them first (eval "
                                "\"$(aws configure export-credentials --profile " +
                                p.name + " --format env)\")");
    }
  }
}

Credentials find_credentials(const Profile& p, const std::string& display) {
  std::vector<std::string> looked;
  if (p.named_in_spec) {
    looked.push_back(
        "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY (skipped: the spec names the "
        "profile '" +
        p.name + "')");
  } else {
    const std::string id = env("AWS_ACCESS_KEY_ID"), secret = env("AWS_SECRET_ACCESS_KEY");
    if (!id.empty() && !secret.empty()) return {id, secret, env("AWS_SESSION_TOKEN")};
    if (!id.empty() || !secret.empty())
      config_error(display,
                   std::string(id.empty() ? "AWS_SECRET_ACCESS_KEY" : "AWS_ACCESS_KEY_ID") +
                       " is set but " +
                       (id.empty() ? "AWS_ACCESS_KEY_ID" : "AWS_SECRET_ACCESS_KEY") + " is not");
    looked.push_back("AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY (not set)");
  }
  Credentials c;
  if (keys_of(p.credentials, p.credentials_file, p.name, display, &c)) return c;
  looked.push_back(looked_in(p.credentials_file, p.name, p.credentials));
  if (keys_of(p.config, p.config_file, p.config_label(), display, &c)) return c;
  looked.push_back(looked_in(p.config_file, p.config_label(), p.config));
  refuse_indirect_credentials(p, display);
  std::string where;
  for (const std::string& l : looked) where += (where.empty() ? "" : ", ") + l;
  config_error(display, "no AWS credentials found: looked in " + where +
                            " (a public bucket is read with \"s3\": {\"anonymous\": true})");
}

std::string endpoint_of(const S3Options& spec, const Profile& p, const std::string& region) {
  if (!spec.endpoint.empty()) return spec.endpoint;
  const bool ignore = lower(env("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS")) == "true" ||
                      lower(get(p.config, "ignore_configured_endpoint_urls")) == "true";
  if (!ignore)
    for (const std::string& v : {env("AWS_ENDPOINT_URL_S3"), env("AWS_ENDPOINT_URL"),
                                 get(p.config, "s3.endpoint_url"), get(p.config, "endpoint_url")})
      if (!v.empty()) return v;
  return "https://s3." + region + ".amazonaws.com";
}

Profile load_profile(const S3Options& spec, const std::string& display) {
  Profile p;
  p.named_in_spec = !spec.profile.empty();
  const std::string from_env = env("AWS_PROFILE");
  p.name = p.named_in_spec ? spec.profile : !from_env.empty() ? from_env : "default";
  p.credentials_file = load(file_path("AWS_SHARED_CREDENTIALS_FILE", ".aws/credentials"));
  p.config_file = load(file_path("AWS_CONFIG_FILE", ".aws/config"));
  p.credentials = section(p.credentials_file, p.name);
  p.config = section(p.config_file, p.config_label());
  if (!p.config && p.name == "default") p.config = section(p.config_file, "profile default");
  if ((p.named_in_spec || !from_env.empty()) && !p.credentials && !p.config)
    config_error(display, "the profile '" + p.name + "' (named by " +
                              (p.named_in_spec ? "the spec" : "AWS_PROFILE") + ") is in neither " +
                              p.credentials_file.path + " nor " + p.config_file.path);
  return p;
}

}  // namespace

IniFile parse_ini(std::string_view text, const std::string& path) {
  IniFile ini;
  IniSection* current = nullptr;
  std::string nesting;  // the key whose indented lines follow ("" when none)
  size_t line_no = 0, start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view raw = text.substr(start, end - start);
    start = end + 1;
    ++line_no;
    const std::string line = trim(raw);
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    auto fail = [&](const std::string& why) {
      throw Error(ErrorCode::kInvalidArgument, kStage, why,
                  path + " line " + std::to_string(line_no));
    };
    const bool indented = std::isspace(static_cast<unsigned char>(raw[0]));
    if (line[0] == '[') {
      if (line.back() != ']') fail("a section line ends with ']'");
      current = &ini[trim(std::string_view(line).substr(1, line.size() - 2))];
      nesting.clear();
      continue;
    }
    const size_t eq = line.find('=');
    if (eq == std::string::npos) fail("expected [section] or key = value");
    if (!current) fail("a key before the first [section]");
    const std::string key = lower(trim(std::string_view(line).substr(0, eq)));
    const std::string value = trim(std::string_view(line).substr(eq + 1));
    if (key.empty()) fail("a key is missing before '='");
    if (indented && !nesting.empty()) {
      (*current)[nesting + "." + key] = value;
      continue;
    }
    (*current)[key] = value;
    nesting = value.empty() ? key : "";
  }
  return ini;
}

Config resolve_config(const S3Options& spec, const std::string& display) {
  const Profile p = load_profile(spec, display);
  Config c;
  c.profile = p.name;
  for (const std::string& r : {spec.region, env("AWS_REGION"), env("AWS_DEFAULT_REGION"),
                               get(p.config, "region"), std::string("us-east-1")}) {
    if (r.empty()) continue;
    c.region = r;
    break;
  }
  if (!std::all_of(c.region.begin(), c.region.end(), [](char ch) {
        return std::islower(static_cast<unsigned char>(ch)) ||
               std::isdigit(static_cast<unsigned char>(ch)) || ch == '-';
      }))
    config_error(display,
                 "the region '" + c.region + "' holds other characters than a-z, 0-9, '-'");
  c.endpoint = endpoint_of(spec, p, c.region);
  if (lower(c.endpoint).rfind("http://", 0) != 0 && lower(c.endpoint).rfind("https://", 0) != 0)
    config_error(display, "the endpoint '" + c.endpoint + "' is not an http:// or https:// URL");
  const std::string style = get(p.config, "s3.addressing_style");
  if (!spec.addressing.empty() && spec.addressing != "auto")
    c.addressing = parse_addressing(spec.addressing, display);
  else if (!style.empty())
    c.addressing = parse_addressing(style, p.config_file.path + " [" + p.config_label() + "]");
  c.anonymous = spec.anonymous;
  if (c.anonymous) return c;
  c.credentials = find_credentials(p, display);
  register_secret(c.credentials.secret);
  register_secret(c.credentials.token);
  return c;
}

}  // namespace dataecho::s3
