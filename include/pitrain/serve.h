// `pitrain serve`: a small HTTP server (cpp-httplib) for the game and the training curves.
//   GET  /                the play page: draw, the model guesses (page and script embedded)
//   GET  /runs            the --log CSV files as curves, refreshed while runs write them
//   GET  /api/classes     {"classes": [...]}
//   POST /api/predict     {"pixels": [784 integers 0-255]} -> {"top": [{"class": ..., "p": ...} x3]}
//   GET  /api/runs        the --log files' columns: {"runs": [{"name", "path", "columns"|"error"}]}
// Every bad request gets a 4xx with one line of JSON, {"error": "..."}.
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
  // Connections served at once (each holds its thread until it closes or is idle for 5 s);
  // more wait in the queue.
  int threads = 32;
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
nlohmann::json runs_json(const std::vector<std::string>& logs);

// The embedded pages (src/serve/*_page.cpp).
extern const char* const kPlayPage;
extern const char* const kRunsPage;

}  // namespace pitrain
