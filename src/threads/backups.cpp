// A crowded batch's shares with backups (threads.h, ThreadedModel): the calling thread computes
// from the first share, the workers from the last, and no one waits for a worker.
#include <algorithm>

#include "pitrain/image_files.h"
#include "pitrain/threads.h"

namespace pitrain {
namespace {

constexpr int kSlotBits = 16;  // open_: batch << kSlotBits | slot

// Whether the caller now holds share s of `batch`: claims are taken once a batch, by any thread.
bool claim(std::atomic<uint64_t>& claimed, uint64_t batch) {
  uint64_t last = claimed.load();
  return last != batch && claimed.compare_exchange_strong(last, batch);
}

}  // namespace

void ThreadedModel::add_backup_scratch(int count) {
  const int threads = pool_.size();
  if (count <= backup_shares_ && !slots_.empty()) return;
  if (!slots_.empty()) pool_.withdraw_posted();  // the buffers below move under workers of an earlier batch
  backup_shares_ = std::max(count, backup_shares_);
  slots_.resize(size_t(threads));
  if (!reading_) {
    reading_ = std::make_unique<std::atomic<int>[]>(size_t(threads));
    for (int t = 0; t < threads; ++t) reading_[t] = -1;
  }
  claimed_ = std::make_unique<std::atomic<uint64_t>[]>(size_t(backup_shares_));
  done_ = std::make_unique<std::atomic<uint64_t>[]>(size_t(backup_shares_));
  for (int s = 0; s < backup_shares_; ++s) claimed_[s] = 0, done_[s] = 0;
  backup_grads_.assign(size_t((threads - 1) * backup_shares_), std::vector<float>(size_t(model_.num_params())));
  backup_stats_.assign(backup_grads_.size(), LossStats{});
}

LossStats ThreadedModel::forward_backward_crowded(const float* x, const int32_t* y, int n, const Context& ctx) {
  const int count = shares(n);
  add_scratch(count);
  add_backup_scratch(count);
  const uint64_t batch = ++batches_;
  // A slot that no worker reads: closed first, so that a worker that has not yet said which
  // slot it reads will find the batch gone (both sides' atomics are sequentially consistent).
  open_ = 0;
  auto read_by_a_worker = [&](int slot) {
    for (int t = 1; t < pool_.size(); ++t)
      if (reading_[t] == slot) return true;
    return false;
  };
  int slot = 0;
  while (read_by_a_worker(slot)) ++slot;
  Slot& job = slots_[size_t(slot)];
  job.params.resize(size_t(model_.num_params())), job.x.assign(x, x + int64_t(n) * kImagePixels), job.y.assign(y, y + n);
  copy_for_workers(model_.params().data(), job.params.data(), model_.num_params());
  job.n = n, job.count = count, job.batch = batch, job.ctx = ctx;
  open_ = batch << kSlotBits | uint64_t(slot);
  pool_.post(backup_job_);

  struct Close {  // no worker starts a share of this batch after it, whatever happens here
    ThreadedModel& m;
    ~Close() {
      m.open_ = 0;
      m.model_.bind_grads(m.model_.grads().data());
    }
  } close{*this};
  bool prepared = false;
  for (int s = 0; s < count; ++s) {
    if (!claim(claimed_[s], batch)) {  // a worker's: its result if done, else this thread's own
      const uint64_t done = done_[s];
      if (done >> kSlotBits == batch) {
        const int worker = int(done & ((1u << kSlotBits) - 1));
        std::copy_n(worker_grads(worker, s), model_.num_params(), grads_of_share(s));
        stats_[size_t(s)] = backup_stats_[size_t((worker - 1) * backup_shares_ + s)];
        ++worker_shares_;
        continue;
      }
    }
    model_.bind_grads(grads_of_share(s));
    stats_[size_t(s)] = share_forward_backward(model_, x, y, n, count, s, ctx, prepared);
    prepared = true;
  }
  const int chain_count = chains(n);
  for (int chain = 0; chain < chain_count; ++chain)
    for (int s = chain + chain_count; s < count; s += chain_count) add_share_to_chain(s, chain);
  add_chains(chain_count, 0, model_.num_params());
  return sum_stats(count);
}

// Shares from the last, each claimed first, into this worker's own buffers, from the open
// batch's slot; an exception leaves the rest to the calling thread, which meets it itself.
void ThreadedModel::worker_backups(int worker) {
  const uint64_t open = open_;
  if (open == 0) return;
  const int slot = int(open & ((1u << kSlotBits) - 1));
  reading_[worker] = slot;
  if (open_ == open) {  // still open: the calling thread will not write the slot until we let go of it
    Slot& job = slots_[size_t(slot)];
    Model& scratch = of_thread(worker);
    scratch.read_params(job.params.data());
    bool prepared = false;
    try {
      for (int s = job.count - 1; s >= 0 && open_ == open; --s) {
        if (!claim(claimed_[s], job.batch)) continue;
        scratch.bind_grads(worker_grads(worker, s));
        backup_stats_[size_t((worker - 1) * backup_shares_ + s)] =
            share_forward_backward(scratch, job.x.data(), job.y.data(), job.n, job.count, s, job.ctx, prepared);
        prepared = true;
        done_[s] = job.batch << kSlotBits | uint64_t(worker);
      }
    } catch (...) {
    }
  }
  reading_[worker] = -1;
}

}  // namespace pitrain
