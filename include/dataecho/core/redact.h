// Credentials never leave in text: every http(s) URL inside a text that dataecho prints
// or writes (error messages, warnings, summaries) goes out with its userinfo and its
// whole query string redacted: https://user:pass@host/a?X-Amz-Signature=... becomes
// https://***@host/a?<redacted>. Signatures and tokens hide in query strings under many
// names (X-Amz-Signature, X-Amz-Credential, X-Amz-Security-Token, X-Goog-Signature,
// Azure's sig/se/sp), so the query is dropped whole rather than by a list of names.
// Thread-safety: plain functions.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace dataecho {

// `text` with every http:// or https:// URL in it redacted (see above). A URL ends at
// whitespace, a quote, '<', '>' or ')'. Text without such a URL comes back unchanged.
std::string redact_urls(std::string_view text);
// A copy of `j` with every string in it passed through redact_urls (keys are kept).
nlohmann::json redact_json_urls(const nlohmann::json& j);

}  // namespace dataecho
