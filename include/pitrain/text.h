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

// JSON text of j (nlohmann::json or ordered_json). Bytes that are not UTF-8 (a file name on a
// Latin-1 system, a URL's %FF) become U+FFFD instead of an exception.
template <class Json>
std::string json_text(const Json& j, int indent = -1) {
  return j.dump(indent, ' ', false, Json::error_handler_t::replace);
}

}  // namespace pitrain
