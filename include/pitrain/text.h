// Text for what the program prints: numbers printf-style (the progress line, --sync auto's
// reasons, error messages) and JSON.
#pragma once
#include <cstdio>
#include <string>

namespace pitrain {

// format: one printf conversion of a double, e.g. "%.4f" or "%.0f ms".
inline std::string format_number(const char* format, double v) {
  char text[64];
  std::snprintf(text, sizeof text, format, v);
  return text;
}

// `text` from a file, safe to print: control bytes (terminal escapes among them), DEL and bytes
// past ASCII as \xNN, so that a message never moves the cursor or retitles the terminal.
inline std::string escaped(const std::string& text) {
  std::string out;
  for (const unsigned char c : text) {
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += char(c);
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    }
  }
  return out;
}

// JSON text of j (nlohmann::json or ordered_json). Bytes that are not UTF-8 (a file name on a
// Latin-1 system, a URL's %FF) become U+FFFD instead of an exception.
template <class Json>
std::string json_text(const Json& j, int indent = -1) {
  return j.dump(indent, ' ', false, Json::error_handler_t::replace);
}

}  // namespace pitrain
