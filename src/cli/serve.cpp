#include "pitrain/cli.h"
#include "pitrain/error.h"
#include "pitrain/serve.h"

namespace pitrain::cli {

int serve(int argc, char** argv, Comm& comm) {
  ServeOptions o;
  cxxopts::Options options =
      command_options("serve", "Play against a model in the browser, and watch training curves");
  options.add_options()("model", "Checkpoint from `pitrain train --checkpoint` (required)",
                        cxxopts::value(o.model), "FILE")(
      "host", "Address to listen on; 0.0.0.0 for every network (play from a phone)",
      cxxopts::value(o.host)->default_value(o.host),
      "ADDRESS")("port", "TCP port; 0 picks a free one",
                 cxxopts::value(o.port)->default_value(std::to_string(o.port)), "N")(
      "log", "CSV from `pitrain train --log`, plotted at /runs (repeat for several runs)",
      cxxopts::value(o.logs), "FILE")(
      "connections",
      "Connections open at once (1 to 256), at most 8 from one address, each until it closes or is "
      "idle for 5 s; more wait in a queue",
      cxxopts::value(o.connections)->default_value(std::to_string(o.connections)), "N");
  cxxopts::ParseResult r;
  if (!parse(options, argc, argv, comm, r)) return 0;
  require(comm.size() == 1, "serve: start it without mpirun (one process serves)");
  require(!o.model.empty(), "serve: give --model FILE.h5 (from `pitrain train --checkpoint`)");
  require(o.port >= 0 && o.port <= 65535,
          "serve: --port " + std::to_string(o.port) + ": use 0-65535");
  require(o.connections >= 1 && o.connections <= 256,
          "serve: --connections " + std::to_string(o.connections) + ": use 1-256");
  pitrain::serve(o);
  return 0;
}

}  // namespace pitrain::cli
