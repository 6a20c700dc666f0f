#include <cstdio>

#include "pitrain/checkpoint.h"
#include "pitrain/cli.h"
#include "pitrain/export.h"

namespace pitrain::cli {

int export_model(int argc, char** argv, Comm& comm) {
  std::string model_path, tfjs_dir;
  cxxopts::Options options =
      command_options("export", "Write a checkpoint's model as a TensorFlow.js Layers model");
  options.add_options()("model", "Checkpoint from `pitrain train --checkpoint` (required)",
                        cxxopts::value(model_path), "FILE")(
      "tfjs", "Folder for model.json and group1-shard1of1.bin, made if missing (required)",
      cxxopts::value(tfjs_dir), "DIR");
  cxxopts::ParseResult r;
  if (!parse(options, argc, argv, comm, r)) return 0;
  require(!model_path.empty() && !tfjs_dir.empty(), "export: give --model FILE.h5 and --tfjs DIR");
  run_together(comm, [&] {  // one small file: rank 0 writes it, the others learn how it went
    if (comm.rank() != 0) return;
    const Checkpoint ckpt = load_checkpoint(model_path);
    export_tfjs(ckpt, tfjs_dir);
    std::printf(
        "wrote %s/model.json and %s/group1-shard1of1.bin: a TensorFlow.js Layers model of %s, %lld "
        "weights, "
        "%zu classes\n",
        tfjs_dir.c_str(), tfjs_dir.c_str(), ckpt.model.spec().c_str(),
        (long long)ckpt.model.num_params(), ckpt.class_names.size());
  });
  return 0;
}

}  // namespace pitrain::cli
