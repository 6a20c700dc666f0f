#include <cmath>
#include <iostream>

#include "pitrain/cli.h"
#include "pitrain/fit.h"

namespace pitrain::cli {
namespace {

const std::vector<std::string> kGroups = {"Data and model", "Optimisation",      "Checkpoint",
                                          "Sync",           "Ranks and threads", "Output"};
const char* const kExamples =
    "  # One process, on this machine's cores:\n"
    "  build/pitrain train --data datasets/fashion-mnist.h5 --epochs 3 --checkpoint model.h5 --log "
    "run.csv\n"
    "  # Four Raspberry Pis, one rank each with all its cores (mpi_hostfiles/README.md):\n"
    "  mpirun -np 4 --hostfile mpi_hostfiles/pis --map-by node --bind-to none build/pitrain train "
    "\\\n"
    "    --data datasets/quickdraw.h5 --epochs 8 --checkpoint model.h5 --sync auto --lr-scaling "
    "linear\n";

// --sync's help: auto, then the strategies' table.
std::string sync_help() {
  std::string help =
      "auto: time the link and a step at start-up and choose (the way to run on Pis)";
  for (const auto& [name, what] : sync_strategies()) help += "; " + name + ": " + what;
  return help;
}

void check_train_flags(const TrainOptions& o, const cxxopts::ParseResult& r) {
  require(!o.data.empty(), "train: --data FILE.h5 is required (make one with `pitrain prepare`)");
  require(o.epochs > 0, "--epochs must be a positive integer, got " + std::to_string(o.epochs));
  require(o.batch_size > 0,
          "--batch-size must be a positive integer, got " + std::to_string(o.batch_size));
  require(o.steps_per_epoch >= 0, "--steps-per-epoch must be 0 (one pass) or positive");
  require(o.lr > 0 && std::isfinite(o.lr), "--lr must be a positive number");
  require(o.momentum >= 0 && o.momentum < 1, "--momentum must be in [0, 1)");
  require(!r.count("momentum") || o.optimizer == "sgd",
          "--momentum is SGD's: add --optimizer sgd, or leave it out (Adam has its own)");
  require_choice("--optimizer", o.optimizer, optimizer_names());
  require_choice("--lr-scaling", o.lr_scaling, lr_scaling_names());
  require(o.warmup_epochs >= 0 && o.warmup_epochs <= 1e6, "--warmup-epochs must be 0 to 1000000");
  require(o.threads >= 0 && o.threads <= 1024,
          "--threads must be 0 (automatic) or 1 to 1024, got " + std::to_string(o.threads));
  require(o.expect_ranks >= 0,
          "--expect-ranks must be 0 (any) or positive, got " + std::to_string(o.expect_ranks));
  require(o.checkpoint_every > 0, "--checkpoint-every must be a positive number of epochs");
  require(o.checkpoint_every_steps >= 0,
          "--checkpoint-every-steps must be 0 (off) or a positive number of steps");
  require(o.checkpoint_seconds >= 0 && std::isfinite(o.checkpoint_seconds),
          "--checkpoint-seconds must be 0 (off) or a positive number of seconds");
  require(!o.checkpoint.empty() ||
              (!o.checkpoint_every_steps && !o.checkpoint_seconds && !r.count("checkpoint-every")),
          "--checkpoint-every, --checkpoint-every-steps and --checkpoint-seconds need --checkpoint "
          "FILE to write to");
  require(
      r["data-memory"].as<int64_t>() >= 1 && r["data-memory"].as<int64_t>() <= (int64_t(1) << 30),
      "--data-memory must be 1 to 1073741824 MB");
  require(o.stall_timeout >= 0, "--stall-timeout must be 0 (off) or a positive number of seconds");
  require_choice("--grad-dtype", r["grad-dtype"].as<std::string>(), wire_type_names());
  require(o.sync.sync_every >= 1, "--sync-every must be a positive number of steps");
  require(o.sync.sync_warmup >= 0, "--sync-warmup must be 0 or positive");
  require(o.sync.powersgd_rank >= 1 && o.sync.powersgd_rank <= 64,
          "--powersgd-rank must be 1 to 64, got " + std::to_string(o.sync.powersgd_rank));
  require(o.sync.outer_lr > 0 && std::isfinite(o.sync.outer_lr),
          "--outer-lr must be a positive number");
  require(o.sync.outer_momentum >= 0 && o.sync.outer_momentum < 1,
          "--outer-momentum must be in [0, 1)");
  require(o.sync.overlap_steps >= 0,
          "--overlap-steps must be 0 (at the next round) or a positive number of steps");
  const std::string sync = r["sync"].as<std::string>();
  std::vector<std::string> names = {"auto"};
  for (const auto& [name, what] : sync_strategies()) names.push_back(name);
  require_choice("--sync", sync, names);
  if (sync == "auto")
    for (const char* flag :
         {"sync-every", "grad-dtype", "error-feedback", "overlap", "overlap-steps", "bucket-kb"})
      require(!r.count(flag), std::string("--sync auto chooses --") + flag +
                                  " itself: leave it out, or name a strategy with --sync");
  if (sync == "per-step")
    for (const char* flag :
         {"sync-every", "sync-warmup", "outer-lr", "outer-momentum", "overlap-steps"})
      require(!r.count(flag), std::string("--") + flag + " is local SGD's: add --sync local-sgd");
  require(!o.sync.overlap_steps || o.sync.overlap,
          "--overlap-steps applies to overlapped rounds: add --overlap");
  // In KB: bounded so that the bytes fit an int64.
  const int64_t bucket_kb = r["bucket-kb"].as<int64_t>();
  require(bucket_kb > 0 && bucket_kb <= 1048576,
          "--bucket-kb must be 1 to 1048576 (1 GB), got " + std::to_string(bucket_kb));
}

// The flags of the data, the model, the optimisation and checkpoints, written into `o`.
cxxopts::Options train_options(TrainOptions& o) {
  cxxopts::Options options = command_options(
      "train",
      "Data-parallel training: every rank trains on its slice of the data, and the ranks average\n"
      "their gradients every step (or, with --sync local-sgd, what they learnt every K steps)");
  options.add_options("Data and model")(
      "data", "Dataset from `pitrain prepare` (required); each rank reads its own slice",
      cxxopts::value(o.data), "FILE")(
      "data-memory",
      "Most MB of data a rank holds (3/4 training rows, 1/4 validation's); a larger slice is "
      "read from the file in windows as it trains",
      cxxopts::value<int64_t>()->default_value(std::to_string(kDefaultDataMemory >> 20)),
      "MB")("model",
            "cnn, mlp, cnn128 or a layer list (see docs/data.md); with "
            "--resume and no --model, the checkpoint's",
            cxxopts::value(o.model)->default_value("cnn"),
            "SPEC")("seed", "Seed of the weights, the shuffles and dropout",
                    cxxopts::value(o.seed)->default_value("0"), "N");
  options.add_options("Optimisation")("epochs",
                                      "Epochs in all (with --resume, counting the checkpoint's)",
                                      cxxopts::value(o.epochs)->default_value("1"), "N")(
      "steps-per-epoch", "Steps an epoch (0: one pass over the largest rank slice)",
      cxxopts::value(o.steps_per_epoch)->default_value("0"),
      "N")("batch-size", "Batch per rank (the global batch is ranks x N)",
           cxxopts::value(o.batch_size)->default_value("32"),
           "N")("optimizer", "adam or sgd", cxxopts::value(o.optimizer)->default_value("adam"),
                "NAME")("lr", "Learning rate", cxxopts::value(o.lr)->default_value("0.001"),
                        "RATE")("momentum", "SGD's momentum (with --optimizer sgd only)",
                                cxxopts::value(o.momentum)->default_value("0"), "M")(
      "lr-scaling",
      "none; linear: lr x ranks; sqrt: lr x sqrt(ranks); reached by a linear warm-up (the cnn "
      "runs of bench/RESULTS.md on 4 ranks use linear)",
      cxxopts::value(o.lr_scaling)->default_value("none"),
      "NAME")("warmup-epochs", "Epochs of the linear warm-up to the --lr-scaling rate",
              cxxopts::value(o.warmup_epochs)->default_value("0"), "EPOCHS");
  options.add_options("Checkpoint")(
      "checkpoint",
      "Write the model, optimizer and run state to FILE: rank 0 writes it atomically, and also "
      "when "
      "SIGINT or SIGTERM stops the run (without --checkpoint, to pitrain-stopped.h5)",
      cxxopts::value(o.checkpoint),
      "FILE")("checkpoint-every", "Epochs between checkpoints (and always one at the end)",
              cxxopts::value(o.checkpoint_every)->default_value("1"),
              "N")("checkpoint-every-steps",
                   "Also a checkpoint every N steps, written while training goes on (0: off)",
                   cxxopts::value(o.checkpoint_every_steps)->default_value("0"), "N")(
      "checkpoint-seconds", "Also a checkpoint once SECONDS have passed since the last (0: off)",
      cxxopts::value(o.checkpoint_seconds)->default_value("0"),
      "SECONDS")("resume", "Continue from this checkpoint, on any number of ranks",
                 cxxopts::value(o.resume), "FILE");
  return options;
}

// The flags of syncing, ranks and threads, and output, written into `o`.
void add_sync_and_output_options(cxxopts::Options& options, TrainOptions& o) {
  options.add_options("Sync")("sync", sync_help(),
                              cxxopts::value<std::string>()->default_value("per-step"), "NAME")(
      "sync-every", "Local SGD's K: steps between rounds (8 for WLAN or 100 Mbit/s links)",
      cxxopts::value(o.sync.sync_every)->default_value("8"),
      "K")("sync-warmup", "Steps of per-step gradient averaging before local SGD starts",
           cxxopts::value(o.sync.sync_warmup)->default_value("0"), "N")(
      "grad-dtype",
      "Gradients, or local SGD's parameter changes, on the wire: fp32, fp16, bf16, int8, int4, or "
      "powersgd (low-rank kernels)",
      cxxopts::value<std::string>()->default_value("fp32"), "TYPE")(
      "error-feedback",
      "Carry what 16-, 8- or 4-bit rounding drops into the next step (powersgd always does)",
      cxxopts::value(o.sync.error_feedback))(
      "powersgd-rank", "Rank of --grad-dtype powersgd's factors",
      cxxopts::value(o.sync.powersgd_rank)->default_value("16"),
      "R")("outer-lr", "Local SGD's outer learning rate on the averaged change (DiLoCo: 0.7)",
           cxxopts::value(o.sync.outer_lr)->default_value("1"),
           "RATE")("outer-momentum", "Local SGD's outer Nesterov momentum (DiLoCo: 0.9)",
                   cxxopts::value(o.sync.outer_momentum)->default_value("0"),
                   "M")("overlap",
                        "Communicate while computing: gradient buckets during backward; with "
                        "local-sgd, each average during the next K steps",
                        cxxopts::value(o.sync.overlap))(
      "overlap-steps",
      "With --overlap and --sync-every: apply each average N steps after its round started (0: at "
      "the next round)",
      cxxopts::value(o.sync.overlap_steps)->default_value("0"),
      "N")("bucket-kb", "Gradient bucket size for --overlap with per-step averaging",
           cxxopts::value<int64_t>()->default_value("1024"), "KB");
  options.add_options("Ranks and threads")(
      "threads", "Compute threads a rank (0: the node's cores / the ranks on it)",
      cxxopts::value(o.threads)->default_value("0"),
      "N")("expect-ranks", "Fail at once unless started as N ranks (0: off, any number)",
           cxxopts::value(o.expect_ranks)->default_value("0"), "N")(
      "stall-timeout", "End the job when start-up or a step takes longer than SECONDS (0: never)",
      cxxopts::value(o.stall_timeout)->default_value("300"), "SECONDS");
  options.add_options("Output")("log",
                                "CSV file, one row an epoch (`pitrain serve --log` plots it)",
                                cxxopts::value(o.log_csv), "FILE")(
      "json", "End with one JSON line of figures instead of the progress output",
      cxxopts::value(o.json))(
      "progress-file",
      "Rank 0 rewrites FILE with the steps taken, up to 10 times a second (for `pitrain elastic`)",
      cxxopts::value(o.progress_file), "FILE");
}

}  // namespace

int train(int argc, char** argv, Comm& comm) {
  TrainOptions o;
  cxxopts::Options options = train_options(o);
  add_sync_and_output_options(options, o);
  cxxopts::ParseResult r;
  if (!parse(options, argc, argv, comm, r, {kGroups, kExamples})) return 0;
  check_train_flags(o, r);
  if (!o.resume.empty() && !r.count("model")) o.model.clear();  // the checkpoint's model
  o.sync.wire = *wire_type_named(r["grad-dtype"].as<std::string>());
  o.sync_auto = r["sync"].as<std::string>() == "auto";
  if (!o.sync_auto) o.sync.strategy = r["sync"].as<std::string>();
  if (o.sync.strategy == "per-step")
    o.sync.sync_every = 1;  // --sync-every's default is local SGD's
  o.sync.bucket_bytes = r["bucket-kb"].as<int64_t>() * 1024;
  o.data_memory = r["data-memory"].as<int64_t>() << 20;
  fit(o, comm, std::cout);
  return 0;
}

}  // namespace pitrain::cli
