// s3_xml.h: element texts and S3 error bodies.
#include "s3_xml.h"

#include <cstdlib>

namespace dataecho::s3 {
namespace {

void append_utf8(std::string& out, unsigned long cp) {
  if (cp == 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) cp = 0xFFFD;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// The character of the reference `ref` (between '&' and ';'), appended; false when it is
// not one XML knows.
bool decode_reference(std::string_view ref, std::string& out) {
  static constexpr std::pair<std::string_view, char> kNamed[] = {
      {"amp", '&'}, {"lt", '<'}, {"gt", '>'}, {"quot", '"'}, {"apos", '\''}};
  for (const auto& [name, c] : kNamed) {
    if (ref == name) {
      out += c;
      return true;
    }
  }
  if (ref.size() < 2 || ref[0] != '#' || ref.size() > 10) return false;
  const bool hex = ref[1] == 'x' || ref[1] == 'X';
  const std::string digits(ref.substr(hex ? 2 : 1));
  if (digits.empty()) return false;
  char* end = nullptr;
  const unsigned long cp = std::strtoul(digits.c_str(), &end, hex ? 16 : 10);
  if (*end != '\0' || digits[0] == '-' || digits[0] == '+' || digits[0] == ' ') return false;
  append_utf8(out, cp);
  return true;
}

}  // namespace

std::string xml_decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const size_t amp = text.find('&', i);
    out.append(text.substr(i, amp - i));
    if (amp == std::string_view::npos) break;
    const size_t semi = text.find(';', amp);
    if (semi == std::string_view::npos ||
        !decode_reference(text.substr(amp + 1, semi - amp - 1), out)) {
      out += '&';
      i = amp + 1;
    } else {
      i = semi + 1;
    }
  }
  return out;
}

std::string xml_text(std::string_view xml, std::string_view tag, size_t from, size_t* end) {
  if (end) *end = std::string_view::npos;
  // (Appended, not "<" + std::string(tag): g++ 12 warns falsely (-Wrestrict) on that.)
  std::string open = "<", close = "</";
  open += tag;
  close += tag;
  close += '>';
  for (size_t at = xml.find(open, from); at != std::string_view::npos;
       at = xml.find(open, at + 1)) {
    const size_t after = at + open.size();
    if (after >= xml.size()) return "";
    if (xml[after] == '/' && xml.substr(after, 2) == "/>") {
      if (end) *end = after + 2;
      return "";
    }
    if (xml[after] != '>' && xml[after] != ' ') continue;  // a longer tag name
    const size_t content = xml.find('>', after);
    if (content == std::string_view::npos) return "";
    const size_t stop = xml.find(close, content + 1);
    if (stop == std::string_view::npos) return "";
    if (end) *end = stop + close.size();
    return xml_decode(xml.substr(content + 1, stop - content - 1));
  }
  return "";
}

ErrorBody parse_error_body(std::string_view xml) {
  ErrorBody e;
  size_t at = xml.find("<Error>");
  if (at == std::string_view::npos) return e;
  const std::string_view body = xml.substr(at);
  e.code = xml_text(body, "Code");
  e.message = xml_text(body, "Message");
  e.region = xml_text(body, "Region");
  e.endpoint = xml_text(body, "Endpoint");
  e.bucket = xml_text(body, "BucketName");
  e.key = xml_text(body, "Key");
  return e;
}

ListPage parse_list_page(std::string_view xml) {
  ListPage page;
  page.truncated = xml_text(xml, "IsTruncated") == "true";
  page.next_token = xml_text(xml, "NextContinuationToken");
  size_t at = 0;
  while (true) {
    const size_t open = xml.find("<Contents>", at);
    if (open == std::string_view::npos) break;
    const size_t close = xml.find("</Contents>", open);
    if (close == std::string_view::npos) break;
    const std::string_view c = xml.substr(open, close - open);
    ListedObject o;
    o.key = xml_text(c, "Key");
    const std::string size = xml_text(c, "Size");
    char* end = nullptr;
    const long long n = std::strtoll(size.c_str(), &end, 10);
    if (!size.empty() && *end == '\0' && n >= 0) o.size = n;
    o.etag = xml_text(c, "ETag");
    page.objects.push_back(std::move(o));
    at = close + 11;
  }
  return page;
}

}  // namespace dataecho::s3
