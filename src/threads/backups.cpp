// A crowded batch's shares with backups (threaded_model.h, ThreadedModel): the calling thread
// computes from the first share, the workers from the last, and no one waits for a worker.
#include <algorithm>

#include "pitrain/image_files.h"
#include "pitrain/threaded_model.h"

namespace pitrain {
namespace {

// open_batch_ is batch << kLowBits | slot, share_done_ batch << kLowBits | worker.
constexpr int kLowBits = 16;
constexpr uint64_t kLowMask = (uint64_t(1) << kLowBits) - 1;

// Whether the caller now holds a share in `batch`: once a batch, by any thread, and never for
// a batch older than the last claim (a worker left behind by an earlier batch gets nothing).
bool claim(std::atomic<uint64_t>& claimed, uint64_t batch) {
  uint64_t last = claimed.load();
  while (last < batch)
    if (claimed.compare_exchange_weak(last, batch)) return true;
  return false;
}

}  // namespace

void ThreadedModel::add_backup_scratch(int count) {
  const int threads = pool_.size();
  if (count <= backup_shares_) return;
  // The buffers below move under workers of an earlier batch.
  if (backup_shares_ > 0) pool_.withdraw_posted();
  backup_shares_ = count;
  slots_.resize(size_t(threads));
  reading_ = std::make_unique<std::atomic<int>[]>(size_t(threads));
  share_claimed_ = std::make_unique<std::atomic<uint64_t>[]>(size_t(count));
  share_done_ = std::make_unique<std::atomic<uint64_t>[]>(size_t(count));
  for (int t = 0; t < threads; ++t) reading_[t] = -1;
  for (int s = 0; s < count; ++s) share_claimed_[s] = 0, share_done_[s] = 0;
  backups_.assign(size_t((threads - 1) * count),
                  Backup{std::vector<float>(size_t(model_.num_params())), {}});
}

LossStats ThreadedModel::forward_backward_crowded(const float* x, const int32_t* y, int n,
                                                  const Context& ctx) {
  const int count = shares(n);
  add_scratch(count);
  add_backup_scratch(count);
  const uint64_t batch = ++batches_;
  // A slot that no worker reads: closed first, so that a worker that has not yet said which
  // slot it reads finds the batch gone (both sides' atomics are sequentially consistent).
  open_batch_ = 0;
  auto read_by_a_worker = [&](int slot) {
    for (int t = 1; t < pool_.size(); ++t)
      if (reading_[t] == slot) return true;
    return false;
  };
  int free_slot = 0;
  while (read_by_a_worker(free_slot)) ++free_slot;
  Slot& slot = slots_[size_t(free_slot)];
  slot.params.resize(size_t(model_.num_params()));
  copy_for_another_core(model_.params().data(), slot.params.data(), model_.num_params());
  slot.x.assign(x, x + n * model_.input_floats()), slot.y.assign(y, y + n);
  slot.n = n, slot.count = count, slot.batch = batch, slot.ctx = ctx;
  open_batch_ = batch << kLowBits | uint64_t(free_slot);
  pool_.post(backup_job_);

  struct Close {  // no worker starts a share of this batch after it, whatever happens here
    ThreadedModel& m;
    ~Close() {
      m.open_batch_ = 0;
      m.model_.bind_grads(m.model_.grads().data());
    }
  } close{*this};
  bool prepared = false;
  for (int s = 0; s < count; ++s) {
    // A worker's: its result if done, else this thread's own.
    if (!claim(share_claimed_[s], batch)) {
      const uint64_t done = share_done_[s];
      if (done >> kLowBits == batch) {
        const Backup& b = backup(int(done & kLowMask), s);
        std::copy(b.grads.begin(), b.grads.end(), grads_of_share(s));
        stats_[size_t(s)] = b.stats;
        ++worker_shares_;
        continue;
      }
    }
    model_.bind_grads(grads_of_share(s));
    stats_[size_t(s)] = share_forward_backward(model_, x, y, n, count, s, ctx, prepared);
    prepared = true;
  }
  add_shares(count, 0, model_.num_params());
  return sum_stats(count);
}

// Shares from the last, each claimed first, into this worker's own buffers, from the open
// batch's slot; an exception leaves the rest to the calling thread, which meets it itself.
void ThreadedModel::worker_backups(int worker) {
  const uint64_t open = open_batch_;
  if (open == 0) return;
  const int slot_index = int(open & kLowMask);
  reading_[worker] = slot_index;
  // Still open: the calling thread will not write the slot until we let go of it.
  if (open_batch_ == open) {
    const Slot& slot = slots_[size_t(slot_index)];
    Model& scratch = of_thread(worker);
    scratch.read_params(slots_[size_t(slot_index)].params.data());
    bool prepared = false;
    try {
      for (int s = slot.count - 1; s >= 0 && open_batch_ == open; --s) {
        if (!claim(share_claimed_[s], slot.batch)) continue;
        if (after_worker_claim) after_worker_claim();
        Backup& b = backup(worker, s);
        scratch.bind_grads(b.grads.data());
        b.stats = share_forward_backward(scratch, slot.x.data(), slot.y.data(), slot.n, slot.count,
                                         s, slot.ctx, prepared);
        prepared = true;
        share_done_[s] = slot.batch << kLowBits | uint64_t(worker);
      }
    } catch (...) {
    }
  }
  reading_[worker] = -1;
}

}  // namespace pitrain
