// `pitrain serve` on libmicrohttpd: it reads each request head into a fixed amount of memory per
// connection, waits for slow clients without holding a thread, and caps the connections of one
// address (docs/serve.md, "Why libmicrohttpd", says why not cpp-httplib).
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <utility>

#include "pitrain/checkpoint.h"
#include "pitrain/classify.h"
#include "pitrain/serve.h"
#include "pitrain/text.h"

namespace pitrain {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kMaxBody = 64 * 1024;
// A connection's memory: its request line and headers must fit.
constexpr size_t kMaxHead = 32 * 1024;
constexpr int kMaxHeaders = 64;  // far more than a browser sends
// To send a whole request, head and body; also the longest silence.
constexpr unsigned kRequestSeconds = 5;
constexpr unsigned kPerAddress = 8;  // connections from one address: a browser opens up to 6
constexpr unsigned kThreads = 4;     // threads that answer; a client still sending holds none
const std::string kPixelsHint =
    "send {\"pixels\": [" + std::to_string(kImagePixels) + " integers 0-255]}";

int socket_of(MHD_Connection* c) {
  return MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD)->connect_fd;
}

// The whole-request deadline. libmicrohttpd's timeout restarts with every byte received, so a
// client sending a byte every few seconds would keep its connection for ever. Each connection
// gets kRequestSeconds from its start, and again from the end of each answer, to send a whole
// request; enforce() shuts down the sockets of those that take longer.
class Deadlines {
 public:
  // The connection opened, or its answer went out: the clock of its next request runs.
  void start(MHD_Connection* c) { set(c, Clock::now() + std::chrono::seconds(kRequestSeconds)); }
  // Its request is whole: no deadline while it is answered.
  void stop(MHD_Connection* c) { set(c, Clock::time_point::max()); }
  void forget(MHD_Connection* c) {
    std::lock_guard<std::mutex> lock(mutex_);
    entries_.erase(c);
  }
  // Shuts the socket down without closing it: libmicrohttpd sees the end of the stream and closes
  // it itself. The lock keeps forget(), which libmicrohttpd calls before it closes a socket, from
  // running meanwhile, so the descriptor is still this connection's.
  void enforce() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [connection, entry] : entries_) {
      if (entry.deadline > Clock::now()) continue;
      ::shutdown(entry.socket, SHUT_RDWR);
      entry.deadline = Clock::time_point::max();
    }
  }

 private:
  struct Entry {
    int socket;
    Clock::time_point deadline;
  };
  void set(MHD_Connection* c, Clock::time_point deadline) {
    std::lock_guard<std::mutex> lock(mutex_);
    entries_[c] = {socket_of(c), deadline};
  }
  std::mutex mutex_;
  std::unordered_map<MHD_Connection*, Entry> entries_;
};

struct App {
  Checkpoint& ckpt;
  const ServeOptions& opts;
  // Host names of this server besides the address a client connected to.
  std::vector<std::string> names;
  std::atomic<int> port;
  std::mutex model_mutex;  // forward uses the model's scratch buffers: one prediction at a time
  Deadlines deadlines;
};

struct Reply {
  Reply(unsigned status, std::string body, std::string type = "application/json")
      : status(status), body(std::move(body)), type(std::move(type)) {}
  unsigned status;
  std::string body;
  std::string type;
  // Server-Timing: browsers' developer tools and bench/serve_load.py show the model's time.
  std::string timing;
};

Reply json_reply(const nlohmann::json& j) { return {200, json_text(j)}; }
Reply error_reply(unsigned status, const std::string& message) {
  return {status, json_text(nlohmann::json{{"error", message}})};
}

const char* header(MHD_Connection* c, const char* name) {
  return MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
}

// The address the client connected to, as a browser writes it in Host: 192.168.1.5, [fe80::1].
std::string local_address(MHD_Connection* c) {
  sockaddr_storage addr = {};
  socklen_t size = sizeof addr;
  char text[INET6_ADDRSTRLEN] = "";
  if (::getsockname(socket_of(c), reinterpret_cast<sockaddr*>(&addr), &size) != 0) return "";
  if (addr.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&addr)->sin_addr, text, sizeof text);
    return text;
  }
  const in6_addr& v6 = reinterpret_cast<sockaddr_in6*>(&addr)->sin6_addr;
  if (IN6_IS_ADDR_V4MAPPED(&v6)) {
    inet_ntop(AF_INET, &v6.s6_addr[12], text, sizeof text);
    return text;
  }
  inet_ntop(AF_INET6, &v6, text, sizeof text);
  return "[" + std::string(text) + "]";
}

// The refusal of a request by its head, or nothing. Checked before any body is read: a refused
// request's connection closes with its body unread.
std::optional<Reply> refuse_head(App& app, MHD_Connection* c, const std::string& method,
                                 const std::string& url) {
  if (MHD_get_connection_values(c, MHD_HEADER_KIND, nullptr, nullptr) > kMaxHeaders)
    return error_reply(
        431, "over " + std::to_string(kMaxHeaders) + " headers; a browser sends far fewer");
  std::vector<std::string> names = app.names;
  names.push_back(local_address(c));
  const char* host = header(c, MHD_HTTP_HEADER_HOST);
  const std::string port = std::to_string(app.port);
  if (!host || !host_allowed(host, names, app.port))
    return error_reply(
        403, "Host " + (host ? "'" + std::string(host) + "'" : std::string("missing")) +
                 ": not this server; open http://127.0.0.1:" + port +
                 "/ or the address it listens on, with :" + port + " (other names are refused)");
  const char* origin = header(c, "Origin");
  if (origin && !origin_allowed(origin, names, app.port))
    return error_reply(403, "Origin '" + std::string(origin) +
                                "': a page of another site; the API answers its own pages only");
  if (url.find("..") != std::string::npos)
    return error_reply(400, "'..' in the path " + url + ": nothing is served from disk");
  // A body's size must be known before it is read: no chunked body, and a Content-Length in bounds.
  const bool post = method == "POST";
  const char* length = header(c, MHD_HTTP_HEADER_CONTENT_LENGTH);
  if (header(c, MHD_HTTP_HEADER_TRANSFER_ENCODING) || (post && !length))
    return error_reply(411,
                       "send the body with a Content-Length header, not chunked; " + kPixelsHint);
  if (length && std::strtoull(length, nullptr, 10) > kMaxBody)
    return error_reply(413, "body over " + std::to_string(kMaxBody / 1024) + " KB; " + kPixelsHint);
  if (header(c, MHD_HTTP_HEADER_CONTENT_ENCODING))
    return error_reply(415, "send the body uncompressed (no Content-Encoding); " + kPixelsHint);
  const char* type = header(c, MHD_HTTP_HEADER_CONTENT_TYPE);
  if (post && !(type && is_json_type(type)))
    return error_reply(415, "send the body with Content-Type: application/json; " + kPixelsHint);
  return std::nullopt;
}

Reply predict(App& app, const std::string& body) {
  const std::vector<uint8_t> pixels = parse_pixels(body);  // as they are, like predict's .npy rows
  std::vector<Guess> guesses;
  double ms = 0;  // the model's time, without the wait for the lock
  {
    std::lock_guard<std::mutex> lock(app.model_mutex);
    const auto start = Clock::now();
    guesses = top_classes(app.ckpt.model, pixels.data(), 3);
    ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  }
  nlohmann::json top = nlohmann::json::array();
  for (const Guess& g : guesses)
    top.push_back({{"class", app.ckpt.class_names[size_t(g.label)]}, {"p", g.probability}});
  Reply reply = json_reply({{"top", top}});
  char timing[64];
  std::snprintf(timing, sizeof timing, "predict;dur=%.3f", ms);
  reply.timing = timing;
  return reply;
}

Reply answer(App& app, const std::string& method, const std::string& url, const std::string& body) {
  const bool get = method == "GET" || method == "HEAD";
  try {
    if (get && url == "/") return {200, kPlayPage, "text/html"};
    if (get && url == "/runs") return {200, kRunsPage, "text/html"};
    if (get && url == "/api/classes") return json_reply({{"classes", app.ckpt.class_names}});
    if (get && url == "/api/runs") return json_reply(runs_json(app.opts.logs));
    if (method == "POST" && url == "/api/predict") return predict(app, body);
  } catch (const BadRequest& e) {
    return error_reply(400, e.what());
  } catch (const std::exception& e) {
    return error_reply(500, failure_text(e));
  }
  return error_reply(
      404, "no such page: " + url + "; try /, /runs, /api/classes, /api/runs or POST /api/predict");
}

MHD_Result send(MHD_Connection* c, const Reply& reply) {
  MHD_Response* response = MHD_create_response_from_buffer(
      reply.body.size(), const_cast<char*>(reply.body.data()), MHD_RESPMEM_MUST_COPY);
  if (!response) return MHD_NO;
  MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, reply.type.c_str());
  if (!reply.timing.empty())
    MHD_add_response_header(response, "Server-Timing", reply.timing.c_str());
  // After an error the connection closes: what the client sends next (the body of a refused
  // request, or a request hidden in it) is never read as a request.
  if (reply.status >= 400) MHD_add_response_header(response, MHD_HTTP_HEADER_CONNECTION, "close");
  const MHD_Result queued = MHD_queue_response(c, reply.status, response);
  MHD_destroy_response(response);
  return queued;
}

// libmicrohttpd calls this once the head is in, again for each piece of the body, and a last time
// with no data once the request is whole. *request holds the body.
MHD_Result on_request(void* cls, MHD_Connection* c, const char* url, const char* method,
                      const char* /*version*/, const char* data, size_t* size, void** request) {
  App& app = *static_cast<App*>(cls);
  if (*request == nullptr) {
    *request = new std::string;  // deleted in on_completed
    const std::optional<Reply> refusal = refuse_head(app, c, method, url);
    return refusal ? send(c, *refusal) : MHD_YES;
  }
  std::string& body = *static_cast<std::string*>(*request);
  if (*size != 0) {  // at most the Content-Length refuse_head bounded
    body.append(data, *size);
    *size = 0;
    return MHD_YES;
  }
  app.deadlines.stop(c);
  return send(c, answer(app, method, url, body));
}

void on_connection(void* cls, MHD_Connection* c, void** /*socket_context*/,
                   MHD_ConnectionNotificationCode code) {
  Deadlines& deadlines = *static_cast<Deadlines*>(cls);
  if (code == MHD_CONNECTION_NOTIFY_STARTED)
    deadlines.start(c);
  else
    deadlines.forget(c);
}

void on_completed(void* cls, MHD_Connection* c, void** request,
                  MHD_RequestTerminationCode /*why*/) {
  delete static_cast<std::string*>(*request);
  *request = nullptr;
  static_cast<Deadlines*>(cls)->start(c);  // the next request on this connection gets its own time
}

Error cannot_listen(const ServeOptions& opts) {
  return Error("serve: cannot listen on " + opts.host + ":" + std::to_string(opts.port) +
               " (in use, or not an address of this machine); pick another --port or --host");
}

// The host as a URL writes it: an IPv6 address in brackets.
std::string url_host(const std::string& host) {
  return host.find(':') != std::string::npos && host.front() != '[' ? "[" + host + "]" : host;
}

// The names a browser may call this server by: the loopback ones and --host as given.
std::vector<std::string> host_names(const std::string& host) {
  std::string name = url_host(host);
  for (char& ch : name) ch = char(std::tolower(static_cast<unsigned char>(ch)));
  return {"localhost", "127.0.0.1", "[::1]", name};
}

MHD_Daemon* start(App& app, const ServeOptions& opts) {
  addrinfo hints = {};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (getaddrinfo(opts.host.c_str(), std::to_string(opts.port).c_str(), &hints, &found) != 0)
    throw cannot_listen(opts);
  sockaddr_storage addr = {};
  std::memcpy(&addr, found->ai_addr, found->ai_addrlen);
  freeaddrinfo(found);
  // MHD_USE_ITC: at the connection limit the server stops accepting, and clients wait in the queue.
  // `--host ::` (every address) takes IPv4 clients too, as a wildcard does elsewhere on Linux.
  const bool v6 = addr.ss_family == AF_INET6;
  const bool every_address =
      v6 && IN6_IS_ADDR_UNSPECIFIED(&reinterpret_cast<sockaddr_in6*>(&addr)->sin6_addr);
  const unsigned flags = MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ITC |
                         (every_address ? MHD_USE_DUAL_STACK
                          : v6          ? MHD_USE_IPv6
                                        : 0);
  const unsigned connections = unsigned(opts.connections);
  MHD_Daemon* daemon =
      MHD_start_daemon(flags, uint16_t(opts.port), nullptr, nullptr, &on_request, &app,  //
                       MHD_OPTION_SOCK_ADDR, reinterpret_cast<sockaddr*>(&addr),         //
                       MHD_OPTION_THREAD_POOL_SIZE, std::min(kThreads, connections),     //
                       MHD_OPTION_CONNECTION_LIMIT, connections,                         //
                       MHD_OPTION_PER_IP_CONNECTION_LIMIT, kPerAddress,                  //
                       MHD_OPTION_CONNECTION_MEMORY_LIMIT, kMaxHead,                     //
                       MHD_OPTION_CONNECTION_TIMEOUT, kRequestSeconds,                   //
                       MHD_OPTION_NOTIFY_CONNECTION, &on_connection, &app.deadlines,     //
                       MHD_OPTION_NOTIFY_COMPLETED, &on_completed, &app.deadlines,       //
                       MHD_OPTION_END);
  if (!daemon) throw cannot_listen(opts);
  return daemon;
}

}  // namespace

std::vector<uint8_t> parse_pixels(const std::string& body) {
  const auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded()) throw BadRequest("body is not JSON; " + kPixelsHint);
  if (!j.is_object() || !j.contains("pixels") || !j["pixels"].is_array())
    throw BadRequest("no \"pixels\" array in the body; " + kPixelsHint);
  const auto& px = j["pixels"];
  if (px.size() != size_t(kImagePixels))
    throw BadRequest("\"pixels\" has " + std::to_string(px.size()) + " values, expected " +
                     std::to_string(kImagePixels) + " (" + image_size_text() + ", row-major)");
  std::vector<uint8_t> pixels(px.size());
  for (size_t i = 0; i < px.size(); ++i) {
    if (!px[i].is_number_integer() || px[i].get<int64_t>() < 0 || px[i].get<int64_t>() > 255)
      throw BadRequest("pixels[" + std::to_string(i) + "] is " + px[i].dump() +
                       ", expected an integer 0-255");
    pixels[i] = uint8_t(px[i].get<int>());
  }
  return pixels;
}

void serve(const ServeOptions& opts) {
  Checkpoint ckpt = load_checkpoint(opts.model);
  if (ckpt.model.input_shape() != kDrawingShape)
    throw Error(opts.model + ": takes images of " + shape_text(ckpt.model.input_shape()) +
                "; the drawing page makes " + shape_text(kDrawingShape) +
                " drawings, so serve needs a model trained on such (Quick Draw, MNIST); use "
                "`pitrain predict` for other images");
  App app{ckpt, opts, host_names(opts.host), {opts.port}, {}, {}};
  MHD_Daemon* daemon = start(app, opts);
  // The one picked for --port 0.
  app.port = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT)->port;
  std::printf(
      "pitrain serve: %s (%zu classes) at http://%s:%d/ , training curves at /runs; Ctrl-C stops\n",
      opts.model.c_str(), ckpt.class_names.size(), url_host(opts.host).c_str(), app.port.load());
  std::fflush(stdout);
  for (;;) {  // until the process is stopped
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    app.deadlines.enforce();
  }
}

}  // namespace pitrain
