// A number as text, printf-style, for what the program prints: the progress line, --sync
// auto's reasons, error messages.
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

}  // namespace pitrain
