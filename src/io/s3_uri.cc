// s3_uri.h: S3 URIs, AWS's encoding, object URLs and the ListObjectsV2 query.
#include "s3_uri.h"

#include <strings.h>

#include <cctype>

#include "dataecho/core/error.h"
#include "dataecho/io/byte_stream.h"

namespace dataecho::s3 {
namespace {

[[noreturn]] void uri_error(const std::string& uri, const std::string& why) {
  throw Error(ErrorCode::kInvalidArgument, kStage, why, uri);
}

bool is_ipv4(std::string_view s) {
  int parts = 0;
  size_t i = 0;
  while (i <= s.size()) {
    size_t digits = 0;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++digits;
    if (digits == 0 || digits > 3) return false;
    ++parts;
    if (i == s.size()) break;
    if (s[i] != '.') return false;
    ++i;
  }
  return parts == 4;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// Whether the URI ends in "#sha256=" and 64 hex digits (the checksum, not the key's).
size_t checksum_fragment(const std::string& uri) {
  const size_t at = uri.rfind("#sha256=");
  if (at == std::string::npos || uri.size() - at != 8 + 64) return std::string::npos;
  for (size_t i = at + 8; i < uri.size(); ++i)
    if (!std::isxdigit(static_cast<unsigned char>(uri[i]))) return std::string::npos;
  return at;
}

// "host" of "host:port/path" ("[::1]:9000" -> "[::1]").
std::string host_name(const std::string& authority_and_path) {
  std::string a = authority_and_path.substr(0, authority_and_path.find('/'));
  const size_t colon = a.rfind(':');
  if (colon != std::string::npos && a.find(']', colon) == std::string::npos) a.resize(colon);
  return a;
}

}  // namespace

std::string bucket_name_problem(std::string_view b) {
  if (b.size() < 3 || b.size() > 63)
    return "a bucket name has 3 to 63 characters, '" + std::string(b) + "' has " +
           std::to_string(b.size());
  for (char c : b)
    if (!(std::islower(static_cast<unsigned char>(c)) ||
          std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == '-'))
      return "a bucket name holds only a-z, 0-9, '.' and '-': '" + std::string(b) + "'";
  if (!std::isalnum(static_cast<unsigned char>(b.front())) ||
      !std::isalnum(static_cast<unsigned char>(b.back())))
    return "a bucket name starts and ends with a letter or digit: '" + std::string(b) + "'";
  if (b.find("..") != std::string_view::npos)
    return "a bucket name has no two adjacent dots: '" + std::string(b) + "'";
  if (is_ipv4(b)) return "a bucket name is not an IP address: '" + std::string(b) + "'";
  for (std::string_view prefix : {"xn--", "sthree-"})
    if (b.substr(0, prefix.size()) == prefix)
      return "a bucket name may not start with '" + std::string(prefix) + "' (reserved by AWS)";
  for (std::string_view suffix : {"-s3alias", "--ol-s3", ".mrap", "--x-s3"})
    if (ends_with(b, suffix))
      return "a bucket name may not end with '" + std::string(suffix) + "' (reserved by AWS)";
  return "";
}

ObjectUri parse_uri(const std::string& uri, bool need_key) {
  if (!is_s3_uri(uri)) uri_error(uri, "not an s3:// URI");
  const size_t fragment = checksum_fragment(uri);
  const std::string body =
      uri.substr(5, fragment == std::string::npos ? std::string::npos : fragment - 5);
  const size_t slash = body.find('/');
  ObjectUri o;
  o.bucket = body.substr(0, slash);
  if (slash != std::string::npos) o.key = body.substr(slash + 1);
  if (o.bucket.find('@') != std::string::npos)
    uri_error(uri,
              "an s3:// URI takes no user or password: credentials come from the "
              "environment or ~/.aws (docs/http.md)");
  if (o.bucket.empty()) uri_error(uri, "the URI names no bucket (s3://bucket/key)");
  if (body.find('?') != std::string::npos) uri_error(uri, "an s3:// URI takes no query ('?')");
  if (const std::string why = bucket_name_problem(o.bucket); !why.empty()) uri_error(uri, why);
  if (need_key && o.key.empty()) uri_error(uri, "the URI names no key (s3://bucket/key)");
  if (o.key.size() > 1024) uri_error(uri, "a key is at most 1024 bytes long");
  if (fragment != std::string::npos)
    for (size_t i = fragment + 8; i < uri.size(); ++i)
      o.sha256 += static_cast<char>(std::tolower(static_cast<unsigned char>(uri[i])));
  return o;
}

std::string uri_encode(std::string_view s, bool encode_slash) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' ||
        (c == '/' && !encode_slash)) {
      out += ch;
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

Addressing parse_addressing(const std::string& text, const std::string& where) {
  if (text == "auto" || text.empty()) return Addressing::kAuto;
  if (text == "path") return Addressing::kPath;
  if (text == "virtual") return Addressing::kVirtual;
  throw Error(ErrorCode::kInvalidArgument, kStage,
              "addressing is \"auto\", \"path\" or \"virtual\", not \"" + text + "\"", where);
}

std::string object_url(const std::string& endpoint, Addressing addressing,
                       const std::string& bucket, const std::string& key) {
  std::string base = endpoint;
  while (!base.empty() && base.back() == '/') base.pop_back();
  const size_t host = base.find("://");
  const size_t start = host == std::string::npos ? 0 : host + 3;
  if (addressing == Addressing::kAuto) {
    const bool aws = ends_with(host_name(base.substr(start)), ".amazonaws.com");
    addressing =
        aws && bucket.find('.') == std::string::npos ? Addressing::kVirtual : Addressing::kPath;
  }
  std::string path;  // appended: g++ 12 warns falsely (-Wrestrict) on "/" + a temporary
  if (!key.empty()) path.append("/").append(uri_encode(key, false));
  if (addressing == Addressing::kPath) return base + "/" + bucket + path;
  return base.substr(0, start) + bucket + "." + base.substr(start) + (path.empty() ? "/" : path);
}

std::string list_query(const std::string& prefix, const std::string& delimiter,
                       const std::string& continuation_token, int max_keys) {
  std::string q;
  auto add = [&](const char* name, const std::string& value) {
    if (value.empty()) return;
    if (!q.empty()) q += '&';
    q += name;
    q += '=';
    q += uri_encode(value, true);
  };
  // In the byte order of the names, as SigV4's canonical query wants them.
  add("continuation-token", continuation_token);
  add("delimiter", delimiter);
  add("list-type", "2");
  add("max-keys", std::to_string(max_keys));
  add("prefix", prefix);
  return q;
}

}  // namespace dataecho::s3

namespace dataecho {

bool is_s3_uri(const std::string& uri) {
  return uri.size() >= 5 && strncasecmp(uri.c_str(), "s3://", 5) == 0;
}

bool is_remote_uri(const std::string& uri) { return is_http_uri(uri) || is_s3_uri(uri); }

}  // namespace dataecho
