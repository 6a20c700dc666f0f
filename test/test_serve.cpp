// The server's pieces without a socket: the /api/predict body, the --log reader and the checks
// of Host, Origin and Content-Type.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <fstream>

#include "helpers.h"
#include "pitrain/classify.h"
#include "pitrain/serve.h"

namespace pitrain {
namespace {

std::string pixels_body(const std::string& last, int count = kImagePixels) {
  std::string body = "{\"pixels\": [";
  for (int i = 0; i + 1 < count; ++i) body += std::to_string(i % 256) + ",";
  return body + last + "]}";
}

}  // namespace

TEST_CASE("serve: the pixels of a predict body, and each wrong body named") {
  const std::vector<uint8_t> px = parse_pixels(pixels_body("255"));
  REQUIRE(px.size() == size_t(kImagePixels));
  CHECK(px[1] == 1);
  CHECK(px[300] == 300 % 256);
  CHECK(px.back() == 255);
  auto refused = [](const std::string& body, const std::string& message) {
    CHECK_THROWS_WITH(parse_pixels(body), Catch::Contains(message));
  };
  refused("pixels=1,2", "body is not JSON");
  refused("[1, 2]", "no \"pixels\" array");
  refused("{\"pixels\": 7}", "no \"pixels\" array");
  refused(pixels_body("0", 783), "\"pixels\" has 783 values, expected 784 (28x28, row-major)");
  refused(pixels_body("256"), "pixels[783] is 256, expected an integer 0-255");
  refused(pixels_body("-1"), "pixels[783] is -1");
  refused(pixels_body("2.5"), "pixels[783] is 2.5");
  refused(pixels_body("\"9\""), "pixels[783] is \"9\"");
}

TEST_CASE("serve: --log files as columns, a row still being written left out") {
  test::TempDir dir;
  {
    std::ofstream(dir / "run.csv")
        << "epoch,loss,accuracy,val_loss,val_accuracy,seconds,mpi_seconds,images\n"
        << "1,0.9,0.7,0.8,0.75,10.5,1,6400\n"
        << "2,0.6,0.8,0.7,0.8,9.5,1,6400\n"
        << "3,0.5,0.8";  // the run is writing this one
    std::ofstream(dir / "other.txt") << "name,value\na,1\n";
    std::ofstream(dir / "wall.csv")
        << "epoch,loss,accuracy,val_loss,val_accuracy,seconds,mpi_seconds,images,wall_seconds\n"
        << "1,0.9,0.7,0.8,0.75,10.5,1,6400,11.25\n"
        << "2,0.6,0.8,0.7,0.8,9.5,1,6400,20.75\n";
  }
  const auto runs = runs_json(
      {dir / "run.csv", dir / "none.csv", dir / "other.txt", dir.path, dir / "wall.csv"})["runs"];
  REQUIRE(runs.size() == 5);
  // The job's time axis: as logged, or for an older log the epochs' seconds added up.
  CHECK(runs[4]["columns"]["wall_seconds"] == nlohmann::json({11.25, 20.75}));
  CHECK(runs[0]["columns"]["wall_seconds"] == nlohmann::json({10.5, 20.0}));
  CHECK(runs[0]["name"] == "run.csv");
  CHECK(runs[0]["columns"]["epoch"] == nlohmann::json({1, 2}));
  CHECK(runs[0]["columns"]["seconds"] == nlohmann::json({10.5, 9.5}));
  CHECK(runs[0]["columns"]["images"] == nlohmann::json({6400, 6400}));
  CHECK(runs[1]["error"] == "not written yet (no such file)");
  CHECK(runs[2]["error"].get<std::string>().find("not a --log file") != std::string::npos);
  CHECK(runs[3]["error"] == "a folder, not a --log file of pitrain train");
  // Names only: no absolute path reaches the network.
  CHECK(runs.dump().find(dir.path) == std::string::npos);
}

TEST_CASE(
    "serve: --log files named without absolute paths; links, FIFOs and large files refused "
    "unread") {
  test::TempDir dir;
  const std::string fifo = dir / "fifo.csv", zero = dir / "zero.csv", big = dir / "big.csv";
  // Opened without O_NONBLOCK, it waits for a writer for ever.
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  REQUIRE(symlink("/dev/zero", zero.c_str()) == 0);
  {
    std::ofstream out(big);
    out << "epoch,val_accuracy,seconds\n";
    for (int i = 0; i < 500000; ++i) out << "1,0.5,1.0\n";  // 5 MB
  }
  const auto runs = runs_json({fifo, zero, big, "runs/a/log.csv", "../a/log.csv"})["runs"];
  REQUIRE(runs.size() == 5);
  CHECK(runs[0]["error"].get<std::string>().find("not a regular file (a FIFO") == 0);
  CHECK(runs[1]["error"] == "a symbolic link: give --log the file it points to");
  CHECK(runs[2]["error"] == "over 4 MB: not a --log file of pitrain train");
  CHECK(runs[0]["name"] == "fifo.csv");
  CHECK(runs[3]["name"] == "runs/a/log.csv");  // relative, below the working folder: as given
  CHECK(runs[4]["name"] == "log.csv");
}

TEST_CASE("serve: Host and Origin name this server, POST bodies are JSON") {
  const std::vector<std::string> names = {"localhost", "127.0.0.1", "[::1]", "192.168.1.5"};
  CHECK(host_allowed("127.0.0.1:8000", names, 8000));
  CHECK(host_allowed("LocalHost:8000", names, 8000));
  CHECK(host_allowed("[::1]:8000", names, 8000));
  CHECK(host_allowed("192.168.1.5:8000", names, 8000));
  CHECK(host_allowed("localhost", names, 80));
  CHECK(host_allowed("[::1]", names, 80));
  // The port is part of the name a browser sends.
  CHECK_FALSE(host_allowed("localhost", names, 8000));
  CHECK_FALSE(host_allowed("localhost:8001", names, 8000));
  CHECK_FALSE(host_allowed("evil.example:8000", names, 8000));  // a rebound DNS name
  CHECK_FALSE(host_allowed("localhost.evil.example:8000", names, 8000));
  CHECK_FALSE(host_allowed("", names, 80));
  CHECK_FALSE(host_allowed(":8000", names, 8000));
  // An address that could not be read names nothing.
  CHECK_FALSE(host_allowed(":8000", {"localhost", ""}, 8000));
  CHECK(origin_allowed("http://127.0.0.1:8000", names, 8000));
  CHECK_FALSE(origin_allowed("https://127.0.0.1:8000", names, 8000));
  CHECK_FALSE(origin_allowed("http://evil.example", names, 8000));
  CHECK_FALSE(origin_allowed("null", names, 8000));
  CHECK(is_json_type("application/json"));
  CHECK(is_json_type("Application/JSON; charset=utf-8"));
  CHECK_FALSE(is_json_type("text/plain"));
  CHECK_FALSE(is_json_type("application/x-www-form-urlencoded"));
  CHECK_FALSE(is_json_type("application/jsonx"));
  CHECK_FALSE(is_json_type(""));
}

TEST_CASE("serve and predict: top classes best first, probabilities summing below 1") {
  Model model("mlp", 5);
  model.init_params(1);
  std::vector<uint8_t> image(static_cast<size_t>(kImagePixels));
  for (size_t i = 0; i < image.size(); ++i) image[i] = uint8_t(i * 7 % 256);
  const std::vector<Guess> top = top_classes(model, image.data(), 3);
  REQUIRE(top.size() == 3);
  CHECK(top[0].probability >= top[1].probability);
  CHECK(top[1].probability >= top[2].probability);
  CHECK(top[0].probability + top[1].probability + top[2].probability < 1.0f);
  CHECK(top_classes(model, image.data(), 9).size() == 5);  // no more than the model's classes
  // Ties go to the lower label, as predict --json's "class" (the first largest) does: weights
  // all zero make every class equally likely.
  std::fill(model.params().begin(), model.params().end(), 0.0f);
  const std::vector<Guess> tied = top_classes(model, image.data(), 5);
  for (int i = 0; i < 5; ++i) CHECK(tied[size_t(i)].label == i);
}

}  // namespace pitrain
