// `pitrain serve`: a small HTTP server (libmicrohttpd) for the game and the training curves.
//   GET  /             the play page: draw, the model guesses (page and script embedded)
//   GET  /runs         the --log CSV files as curves, refreshed while runs write them
//   GET  /api/classes  {"classes": [...]}
//   POST /api/predict  {"pixels": [784 integers 0-255]} -> {"top": [{"class": ..., "p": ...} x3]}
//   GET  /api/runs     the --log files' columns: {"runs": [{"name", "columns"|"error"}]}
// Every bad request that reaches the handler gets a 4xx with one line of JSON, {"error": "..."};
// docs/serve.md lists what the server refuses, and where libmicrohttpd answers itself.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "pitrain/error.h"

namespace pitrain {

struct ServeOptions {
  std::string model;  // checkpoint
  std::string host = "127.0.0.1";
  int port = 8000;  // 0: any free port (the start line says which)
  std::vector<std::string> logs;
  // Connections open at once (each until it closes or is idle for 5 s); more wait in the
  // queue. A waiting client holds no thread, only its connection.
  int connections = 128;
};

// Serves until the process is stopped. Throws Error when the model does not load or the
// address cannot be bound.
void serve(const ServeOptions& opts);

// A request the API refuses: answered 400 with the message.
struct BadRequest : Error {
  using Error::Error;
};

// The 784 pixels of a /api/predict body; throws BadRequest naming what is wrong.
std::vector<uint8_t> parse_pixels(const std::string& body);

// The /api/runs answer: each file's numeric columns by name, rows still being written left out.
// A file is named by its path as given when that is relative and stays below the working folder,
// else by its file name: no absolute path reaches the network.
nlohmann::json runs_json(const std::vector<std::string>& logs);

// Whether a Host header names this server: one of `names` (lower case; an IPv6 address in
// brackets) with `port`, or alone when the port is 80. A page of another site that rebinds its
// DNS name to this machine sends that name, and is refused.
bool host_allowed(const std::string& host, const std::vector<std::string>& names, int port);

// Whether an Origin header is one of this server's own pages: http:// and a host as above.
bool origin_allowed(const std::string& origin, const std::vector<std::string>& names, int port);

// Whether a Content-Type is application/json (parameters such as charset allowed). A cross-site
// form or text/plain POST needs no CORS preflight; a JSON one does, which this server never grants.
bool is_json_type(const std::string& content_type);

// The embedded pages (src/serve/*_page.cpp).
extern const char* const kPlayPage;
extern const char* const kRunsPage;

}  // namespace pitrain
