// Shared test fixtures: temporary folders, raw files, a small learnable synthetic dataset.
#pragma once
#include <mpi.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "pitrain/dataset.h"
#include "pitrain/image_files.h"
#include "pitrain/rng.h"
#include "pitrain/fit.h"

namespace pitrain::test {

// A fresh folder, the same on every rank (rank 0 makes it), removed at the end.
struct TempDir {
  std::string path;
  TempDir() {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    char buf[256] = "/tmp/pitrain-test-XXXXXX";
    if (rank == 0 && !mkdtemp(buf)) throw std::runtime_error("mkdtemp failed");
    MPI_Bcast(buf, sizeof buf, MPI_CHAR, 0, MPI_COMM_WORLD);
    path = buf;
  }
  ~TempDir() {
    MPI_Barrier(MPI_COMM_WORLD);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) std::filesystem::remove_all(path);
  }
  std::string operator/(const std::string& name) const { return path + "/" + name; }
};

inline void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

// A .npy file as numpy writes it (version 1), with the header text given.
inline std::vector<uint8_t> npy_bytes(const std::string& dict, const std::vector<uint8_t>& data,
                                      int version = 1) {
  std::string header = dict;
  const size_t prefix = version == 1 ? 10 : 12;
  while ((prefix + header.size() + 1) % 64) header += ' ';
  header += '\n';
  std::vector<uint8_t> b = {0x93, 'N', 'U', 'M', 'P', 'Y', uint8_t(version), 0};
  const size_t len = header.size();
  b.push_back(uint8_t(len & 0xff));
  b.push_back(uint8_t(len >> 8));
  if (version > 1) b.push_back(0), b.push_back(0);
  b.insert(b.end(), header.begin(), header.end());
  b.insert(b.end(), data.begin(), data.end());
  return b;
}

// Images whose class is a bright 7x7 block at one of `classes` places, plus noise: learnable
// in a few steps. Pixel values depend on (seed, row).
inline Split synthetic_split(int64_t n, int classes, uint64_t seed) {
  Split s;
  s.images.resize(size_t(n) * kImagePixels);
  s.labels.resize(size_t(n));
  for (int64_t i = 0; i < n; ++i) {
    const int c = int(splitmix64(seed * 7919 + uint64_t(i)) % uint64_t(classes));
    s.labels[size_t(i)] = c;
    uint8_t* img = &s.images[size_t(i) * kImagePixels];
    for (int p = 0; p < kImagePixels; ++p)
      img[p] = uint8_t(uniform01(rng_key(seed, uint64_t(i)), uint64_t(p)) * 60);
    const int top = 2 + (c % 3) * 8, left = 2 + (c / 3) * 8;
    for (int y = top; y < top + 7; ++y)
      for (int x = left; x < left + 7; ++x) img[y * kImageSide + x] = 230;
  }
  return s;
}

inline std::vector<std::string> class_names(int classes) {
  std::vector<std::string> names;
  for (int c = 0; c < classes; ++c) names.push_back("class" + std::to_string(c));
  return names;
}

// Rank 0 writes a synthetic dataset file; every rank returns once it exists.
inline void write_synthetic_dataset(const std::string& path, int64_t train, int64_t val,
                                    int classes) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0)
    write_dataset(path, synthetic_split(train, classes, 1), synthetic_split(val, classes, 2),
                  class_names(classes), {{"source", "synthetic test data"}});
  MPI_Barrier(MPI_COMM_WORLD);
}

// Options for a short single-threaded run on `data`.
inline TrainOptions short_run(const std::string& data, const std::string& model, int epochs,
                              int batch) {
  TrainOptions o;
  o.data = data;
  o.model = model;
  o.epochs = epochs;
  o.batch_size = batch;
  o.threads = 1;
  return o;
}

}  // namespace pitrain::test
