// The server's pieces without a socket: the /api/predict body and the --log reader.
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
    std::ofstream(dir / "run.csv") << "epoch,loss,accuracy,val_loss,val_accuracy,seconds,mpi_seconds,images\n"
                                   << "1,0.9,0.7,0.8,0.75,10.5,1,6400\n"
                                   << "2,0.6,0.8,0.7,0.8,9.5,1,6400\n"
                                   << "3,0.5,0.8";  // the run is writing this one
    std::ofstream(dir / "other.txt") << "name,value\na,1\n";
  }
  const auto runs = runs_json({dir / "run.csv", dir / "none.csv", dir / "other.txt", dir.path})["runs"];
  REQUIRE(runs.size() == 4);
  CHECK(runs[0]["name"] == "run.csv");
  CHECK(runs[0]["columns"]["epoch"] == nlohmann::json({1, 2}));
  CHECK(runs[0]["columns"]["seconds"] == nlohmann::json({10.5, 9.5}));
  CHECK(runs[0]["columns"]["images"] == nlohmann::json({6400, 6400}));
  CHECK(runs[1]["error"] == "not written yet (no such file)");
  CHECK(runs[2]["error"].get<std::string>().find("not a --log file") != std::string::npos);
  CHECK(runs[3]["error"] == "a folder, not a --log file of pitrain train");
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
