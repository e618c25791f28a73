// Credentials never leave in text: every http(s) URL inside a text that dataecho prints
// or writes (error messages, warnings, summaries) goes out with its userinfo and its
// whole query string redacted: https://user:pass@host/a?X-Amz-Signature=... becomes
// https://***@host/a?<redacted>. Signatures and tokens hide in query strings under many
// names (X-Amz-Signature, X-Amz-Credential, X-Amz-Security-Token, X-Goog-Signature,
// Azure's sig/se/sp), so the query is dropped whole rather than by a list of names.
// s3:// URIs are treated the same way (their bucket and key are kept).
// Secrets that are not in URLs (an S3 secret access key or session token, a header value
// read from the environment) are registered with register_secret: every occurrence of
// one in a redacted text becomes <redacted>.
// Thread-safety: all functions may be called from any thread.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace dataecho {

// `text` with every http://, https:// or s3:// URL in it redacted and every registered
// secret replaced (see above). A URL ends at whitespace, a quote, '<', '>' or ')'. Text
// without such a URL or secret comes back unchanged.
std::string redact_urls(std::string_view text);
// A copy of `j` with every string in it passed through redact_urls (keys are kept).
nlohmann::json redact_json_urls(const nlohmann::json& j);
// Adds `secret` to the process-wide set redact_urls replaces. Values shorter than 8
// characters are not registered (they could be ordinary words of a message).
void register_secret(std::string_view secret);

}  // namespace dataecho
