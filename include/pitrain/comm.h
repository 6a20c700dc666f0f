// The MPI layer: rank and size, the initial-weights broadcast, the gradient allreduce and the
// metric reductions. It also times every call, for the "mpi: NN%" share in the progress bar.
#pragma once
#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace pitrain {

// Tags of the only point-to-point messages on a Comm's communicator (MPI keeps them apart from
// its collectives).
constexpr int kConnectTag = 7;      // connect_all
constexpr int kStallReportTag = 8;  // the stall watchdog's reports to rank 0

class Comm {
 public:
  explicit Comm(MPI_Comm comm = MPI_COMM_WORLD);  // MPI must be initialised; local
  ~Comm();
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;
  int rank() const { return rank_; }
  int size() const { return size_; }
  void broadcast(float* data, int64_t n, int root = 0);
  void broadcast(uint64_t* data, int n, int root = 0);
  void broadcast(std::string& text, int root = 0);  // resized to the root's
  void allreduce_sum(double* data, int64_t n);      // in place
  void allreduce_max(double* data, int64_t n);      // in place
  // Non-blocking: recv = every rank's send combined with `op` (send may be MPI_IN_PLACE). Large
  // buffers should not be in place: Open MPI's libnbc then sends them through a binomial tree
  // rooted at rank 0 instead of reduce-scatter + allgather. Counted in bytes_sent and, with
  // progress() and wait_all(), in mpi_seconds.
  void start_allreduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op,
                       MPI_Request* request);
  // The same on `on`, a communicator of this one's ranks (a duplicate), timed and counted here.
  void start_allreduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op,
                       MPI_Request* request, MPI_Comm on);
  // Lets pending collectives move on; true: all are done.
  bool progress(std::vector<MPI_Request>& requests);
  void wait_all(std::vector<MPI_Request>& requests);
  void wait(MPI_Request& request);
  // Sends a byte between every pair of ranks. Open MPI's TCP transport connects a pair at its
  // first message, slowly on the emulated hosts: done before training, that time stays
  // out of the first epoch and out of --sync auto's timing of the link (gloo, the peer's
  // transport, also connects every pair when it starts).
  void connect_all();
  // A duplicate of the communicator, for collectives of their own (collective; timed as a call).
  MPI_Comm duplicate();
  // The lowest rank whose `ok` is false, or size() when all are fine; the same on every rank.
  // Lets all ranks leave together when one failed, before any waits in a training collective.
  int first_failed(bool ok);
  // True on every rank where `value` is the same on all of them, else false on every rank.
  bool all_equal(uint64_t value);
  double mpi_seconds() const { return mpi_seconds_; }
  bool in_mpi() const { return in_mpi_; }  // inside a call of this class (read by the watchdog)
  MPI_Comm raw() const { return comm_; }
  int64_t bytes_sent() const { return bytes_sent_; }  // payload handed to collectives by this rank
  int64_t collectives() const { return collectives_; }  // allreduces started by this rank

 private:
  class InMpi;
  MPI_Comm comm_;
  // The blocking calls' duplicate of comm_. A local SGD round's second allreduce starts when
  // each rank sees its first complete, and an epoch's blocking reductions may come between on
  // one rank and not on another; MPI matches a communicator's collectives in the order each
  // rank calls them, whether blocking or not, so the two kinds must not share one.
  // MPI_COMM_NULL until the first blocking call.
  MPI_Comm blocking_ = MPI_COMM_NULL;
  MPI_Comm blocking();
  void allreduce(double* data, int64_t n, MPI_Op op);
  std::atomic<bool> in_mpi_{false};
  int rank_ = 0, size_ = 1;
  double mpi_seconds_ = 0;
  int64_t bytes_sent_ = 0, collectives_ = 0;
};

// Call before MPI_Init. Open MPI's nonblocking allreduce sends anything under 64 KB through a
// binomial tree, each of whose phases carries the whole vector (`cnn` with rounds every 4 steps
// on the emulated WLAN: slower steps than by the ring). The ring carries a 1/P slice a phase in
// 2 (P - 1) phases; Rabenseifner's (reduce-scatter by recursive halving, then allgather by
// recursive doubling) carries as few bytes in 2 log2 P phases, 4 instead of 6 on four ranks,
// and each phase moves on only inside an MPI call: `mlp`'s PowerSGD rounds on 4 emulated hosts at
// 100 Mbit/s make shorter steps than by the ring (bench/cluster.sh). Open MPI falls back to the
// ring for fewer values than the largest power of two up to the ranks' count. Rounds go this way
// unless the user chose otherwise (`mpirun --mca coll_libnbc_iallreduce_algorithm` sets the
// variable this leaves alone) or --sync auto finds the binomial tree as fast
// (set_allreduce_algorithm).
void prefer_rabenseifner_allreduce();

// The nonblocking allreduce's algorithms that rounds may travel by. Rabenseifner's moves the
// fewest bytes a rank, all ranks at once: the best where every host has a link of its own. The
// binomial tree (reduce to rank 0, then broadcast) moves as many bytes in all, but in 6
// messages instead of 16 on four ranks, at most 2 at a time: where all hosts share one medium
// (a WLAN cell), which carries every byte in turn anyway, it is the faster.
enum class AllreduceAlgorithm { rabenseifner, binomial };
const char* allreduce_algorithm_name(AllreduceAlgorithm algorithm);
// The algorithm of the nonblocking allreduces from now on (Open MPI's
// coll_libnbc_iallreduce_algorithm, written through MPI's tool interface); call on every rank
// alike. False, and nothing changed, where it cannot be set (another MPI) or the user chose one.
bool set_allreduce_algorithm(AllreduceAlgorithm algorithm);

// Ranks on this node (Open MPI's OMPI_COMM_WORLD_LOCAL_SIZE), 1 when not launched by mpirun.
int local_ranks();

// Runs `step` on every rank; if it threw on any rank (an Error, a UsageError, or any other
// exception, e.g. std::bad_alloc), every rank throws JointError carrying the message of the
// lowest failed rank, so all leave together instead of hanging: `step` may hold work that only
// some ranks do (rank 0 writing a file) and that fails on those alone.
void run_together(Comm& comm, const std::function<void()>& step);

}  // namespace pitrain
