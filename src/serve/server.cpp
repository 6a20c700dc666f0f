#include <httplib.h>

#include <chrono>
#include <cstdio>
#include <mutex>

#include "pitrain/checkpoint.h"
#include "pitrain/classify.h"
#include "pitrain/serve.h"
#include "pitrain/text.h"

namespace pitrain {
namespace {

constexpr size_t kMaxBody = 64 * 1024;
constexpr int kTimeoutSeconds = 5;  // a slow or half-open client holds a thread no longer
const std::string kPixelsHint = "send {\"pixels\": [" + std::to_string(kImagePixels) + " integers 0-255]}";

void send_json(httplib::Response& res, const nlohmann::json& j) { res.set_content(json_text(j), "application/json"); }

void send_error(httplib::Response& res, int status, const std::string& message) {
  res.status = status;
  send_json(res, {{"error", message}});
}

// What the library's own refusals (no route, body too large, unreadable request) mean.
std::string status_message(const httplib::Request& req, int status) {
  switch (status) {
    case 404: return "no such page: " + req.path + "; try /, /runs, /api/classes, /api/runs or POST /api/predict";
    case 408: return "request too slow: send it within " + std::to_string(kTimeoutSeconds) + " s";
    case 414: return "request line over 8 KB: no page or API path is that long";
    case 413: return "body over " + std::to_string(kMaxBody / 1024) + " KB; " + kPixelsHint;
    default: return "malformed or incomplete HTTP request (HTTP " + std::to_string(status) + ")";
  }
}

}  // namespace

std::vector<uint8_t> parse_pixels(const std::string& body) {
  const auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded()) throw BadRequest("body is not JSON; " + kPixelsHint);
  if (!j.is_object() || !j.contains("pixels") || !j["pixels"].is_array())
    throw BadRequest("no \"pixels\" array in the body; " + kPixelsHint);
  const auto& px = j["pixels"];
  if (px.size() != size_t(kImagePixels))
    throw BadRequest("\"pixels\" has " + std::to_string(px.size()) + " values, expected " + std::to_string(kImagePixels) +
                     " (" + image_size_text() + ", row-major)");
  std::vector<uint8_t> pixels(px.size());
  for (size_t i = 0; i < px.size(); ++i) {
    if (!px[i].is_number_integer() || px[i].get<int64_t>() < 0 || px[i].get<int64_t>() > 255)
      throw BadRequest("pixels[" + std::to_string(i) + "] is " + px[i].dump() + ", expected an integer 0-255");
    pixels[i] = uint8_t(px[i].get<int>());
  }
  return pixels;
}

void serve(const ServeOptions& opts) {
  Checkpoint ckpt = load_checkpoint(opts.model);
  std::mutex model_mutex;  // forward uses the model's scratch buffers: one prediction at a time
  httplib::Server server;
  const int threads = opts.threads;
  server.new_task_queue = [threads] { return new httplib::ThreadPool(size_t(threads)); };
  server.set_read_timeout(kTimeoutSeconds);
  server.set_write_timeout(kTimeoutSeconds);
  server.set_keep_alive_timeout(kTimeoutSeconds);
  server.set_keep_alive_max_count(100);  // a drawing sends a request every 200 ms
  server.set_payload_max_length(kMaxBody);
  server.set_tcp_nodelay(true);  // the answer's headers and body are two writes: no 40 ms wait for an ACK

  // Before any body is read. The library holds the body under set_payload_max_length only when
  // a Content-Length announces it: a chunked body, or one read until the client closes, could
  // fill the memory, and a gzip body inflates past it.
  server.set_pre_routing_handler([](const httplib::Request& req, httplib::Response& res) {
    const bool post = req.method == "POST";
    if (req.path.find("..") != std::string::npos)
      send_error(res, 400, "'..' in the path " + req.path + ": nothing is served from disk");
    else if (post && (req.has_header("Transfer-Encoding") || !req.has_header("Content-Length")))
      send_error(res, 411, "send the body with a Content-Length header, not chunked; " + kPixelsHint);
    else if (post && req.has_header("Content-Encoding"))
      send_error(res, 415, "send the body uncompressed (no Content-Encoding); " + kPixelsHint);
    else
      return httplib::Server::HandlerResponse::Unhandled;
    return httplib::Server::HandlerResponse::Handled;
  });
  server.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (res.body.empty()) send_error(res, res.status, status_message(req, res.status));
    res.set_header("Connection", "close");  // a client that sent nonsense gives its thread back now
  });
  server.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr error) {
    try {
      std::rethrow_exception(error);
    } catch (const BadRequest& e) {
      send_error(res, 400, e.what());
    } catch (const std::exception& e) {
      send_error(res, 500, failure_text(e));
    }
  });

  server.Get("/", [](const httplib::Request&, httplib::Response& res) { res.set_content(kPlayPage, "text/html"); });
  server.Get("/runs", [](const httplib::Request&, httplib::Response& res) { res.set_content(kRunsPage, "text/html"); });
  server.Get("/api/classes", [&](const httplib::Request&, httplib::Response& res) {
    send_json(res, {{"classes", ckpt.class_names}});
  });
  server.Get("/api/runs", [&](const httplib::Request&, httplib::Response& res) { send_json(res, runs_json(opts.logs)); });
  server.Post("/api/predict", [&](const httplib::Request& req, httplib::Response& res) {
    const std::vector<uint8_t> pixels = parse_pixels(req.body);  // as they are, like predict's .npy rows
    std::vector<Guess> guesses;
    double ms = 0;  // the model's time, without the wait for the lock
    {
      std::lock_guard<std::mutex> lock(model_mutex);
      const auto start = std::chrono::steady_clock::now();
      guesses = top_classes(ckpt.model, pixels.data(), 3);
      ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    }
    nlohmann::json top = nlohmann::json::array();
    for (const Guess& g : guesses) top.push_back({{"class", ckpt.class_names[size_t(g.label)]}, {"p", g.probability}});
    // Server-Timing: browsers' developer tools and bench/serve_load.py show the model's time.
    char timing[64];
    std::snprintf(timing, sizeof timing, "predict;dur=%.3f", ms);
    res.set_header("Server-Timing", timing);
    send_json(res, {{"top", top}});
  });

  const int port = opts.port == 0 ? server.bind_to_any_port(opts.host) : opts.port;
  if (port < 0 || (opts.port != 0 && !server.bind_to_port(opts.host, port)))
    throw Error("serve: cannot listen on " + opts.host + ":" + std::to_string(opts.port) +
                " (in use, or not an address of this machine); pick another --port or --host");
  std::printf("pitrain serve: %s (%zu classes) at http://%s:%d/ , training curves at /runs; Ctrl-C stops\n",
              opts.model.c_str(), ckpt.class_names.size(), opts.host.c_str(), port);
  std::fflush(stdout);
  if (!server.listen_after_bind()) throw Error("serve: the server stopped: cannot accept connections on " + opts.host);
}

}  // namespace pitrain
