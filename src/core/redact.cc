// URL redaction for everything dataecho prints or writes (see the header).
#include "dataecho/core/redact.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <mutex>
#include <vector>

namespace dataecho {
namespace {

constexpr size_t kMinSecretSize = 8;

// The registered secrets (register_secret); `any_secret` spares texts the lock until one is.
std::mutex secrets_mu;
std::vector<std::string>& secrets() {
  static std::vector<std::string> s;
  return s;
}
std::atomic<bool> any_secret{false};

// `text` with every registered secret in it replaced by <redacted>.
std::string replace_secrets(std::string text) {
  if (!any_secret.load(std::memory_order_acquire)) return text;
  std::lock_guard<std::mutex> lock(secrets_mu);
  for (const std::string& secret : secrets()) {
    for (size_t at = text.find(secret); at != std::string::npos; at = text.find(secret, at)) {
      text.replace(at, secret.size(), "<redacted>");
      at += 10;
    }
  }
  return text;
}

bool starts_with_ci(std::string_view s, size_t at, std::string_view prefix) {
  if (s.size() - at < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(s[at + i])) != prefix[i]) return false;
  return true;
}

bool ends_url(char c) {
  return std::isspace(static_cast<unsigned char>(c)) || c == '"' || c == '\'' || c == '<' ||
         c == '>' || c == ')';
}

// One URL (scheme included), redacted.
std::string redact_one(std::string_view url) {
  const size_t authority = url.find("//") + 2;
  size_t path = url.find_first_of("/?#", authority);
  if (path == std::string_view::npos) path = url.size();
  std::string out(url.substr(0, authority));
  const std::string_view host = url.substr(authority, path - authority);
  const size_t at = host.rfind('@');
  if (at != std::string_view::npos) {
    out += "***@";
    out += host.substr(at + 1);
  } else {
    out += host;
  }
  const std::string_view rest = url.substr(path);
  const size_t q = rest.find('?');
  if (q == std::string_view::npos) {
    out += rest;
    return out;
  }
  out += rest.substr(0, q);
  const size_t hash = rest.find('#', q);
  const size_t query_end = hash == std::string_view::npos ? rest.size() : hash;
  out += query_end > q + 1 ? "?<redacted>" : "?";  // only a non-empty query hides anything
  if (hash != std::string_view::npos) out += rest.substr(hash);
  return out;
}

}  // namespace

std::string redact_urls(std::string_view original) {
  const std::string replaced = replace_secrets(std::string(original));
  const std::string_view text = replaced;
  std::string out;
  size_t i = 0, copied = 0;
  while (i < text.size()) {
    if (!starts_with_ci(text, i, "http://") && !starts_with_ci(text, i, "https://") &&
        !starts_with_ci(text, i, "s3://")) {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < text.size() && !ends_url(text[end])) ++end;
    out.append(text.substr(copied, i - copied));
    out += redact_one(text.substr(i, end - i));
    i = copied = end;
  }
  if (copied == 0) return replaced;
  out.append(text.substr(copied));
  return out;
}

void register_secret(std::string_view secret) {
  if (secret.size() < kMinSecretSize) return;
  std::lock_guard<std::mutex> lock(secrets_mu);
  for (const std::string& s : secrets())
    if (s == secret) return;
  secrets().emplace_back(secret);
  // Longer secrets first, so that one holding another is replaced whole.
  std::sort(secrets().begin(), secrets().end(),
            [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  any_secret.store(true, std::memory_order_release);
}

nlohmann::json redact_json_urls(const nlohmann::json& j) {
  if (j.is_string()) return redact_urls(j.get_ref<const std::string&>());
  if (j.is_object()) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& [k, v] : j.items()) out[k] = redact_json_urls(v);
    return out;
  }
  if (j.is_array()) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& v : j) out.push_back(redact_json_urls(v));
    return out;
  }
  return j;
}

}  // namespace dataecho
