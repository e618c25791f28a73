// What every libcurl request of the io layer sets from StreamOptions (private to io):
// the stream's GETs (http_stream.cc) and http_head (http_common.cc).
#pragma once

#include <curl/curl.h>

#include <string>

#include "dataecho/io/byte_stream.h"

namespace dataecho::http {

// The stage every HTTP error names.
inline constexpr const char* kStage = "http";

// SSL_CERT_FILE, else CURL_CA_BUNDLE (as the curl tool reads them), else "".
std::string env_ca_file();

// Resets `easy` and sets the options every request to `url` takes from StreamOptions:
// redirects, TLS, extra headers, timeouts (`errbuf` and `headers` must outlive the
// request).
void configure_common(CURL* easy, const std::string& url, const StreamOptions& options,
                      curl_slist* headers, char* errbuf);

}  // namespace dataecho::http
