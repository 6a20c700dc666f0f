// The checks that keep other sites' pages out: the Host and Origin headers, and the
// Content-Type of a POST (a browser sends a cross-site JSON POST only after a preflight).
#include <algorithm>
#include <cctype>

#include "pitrain/serve.h"

namespace pitrain {
namespace {

std::string lower(std::string text) {
  for (char& c : text) c = char(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

}  // namespace

bool host_allowed(const std::string& host, const std::vector<std::string>& names, int port) {
  // NAME:PORT, where NAME may be [IPv6] and holds colons of its own.
  const size_t colon = host.rfind(':');
  const bool has_port = colon != std::string::npos && host.find(']', colon) == std::string::npos;
  const std::string name = lower(has_port ? host.substr(0, colon) : host);
  const std::string port_text = has_port ? host.substr(colon + 1) : "80";
  return !name.empty() && port_text == std::to_string(port) &&
         std::find(names.begin(), names.end(), name) != names.end();
}

bool origin_allowed(const std::string& origin, const std::vector<std::string>& names, int port) {
  const std::string scheme = "http://";
  return origin.compare(0, scheme.size(), scheme) == 0 &&
         host_allowed(origin.substr(scheme.size()), names, port);
}

bool is_json_type(const std::string& content_type) {
  const std::string type = lower(content_type.substr(0, content_type.find(';')));
  const size_t begin = type.find_first_not_of(" \t"), end = type.find_last_not_of(" \t");
  return begin != std::string::npos && type.substr(begin, end + 1 - begin) == "application/json";
}

}  // namespace pitrain
