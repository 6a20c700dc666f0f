#include "pitrain/comm.h"

#include <sys/prctl.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <string>
#include <thread>

#include "pitrain/error.h"

namespace pitrain {
namespace {

// MPI counts are int: move larger buffers in chunks.
template <class Op>
void in_chunks(int64_t n, Op op) {
  for (int64_t off = 0; off < n; off += INT_MAX) op(off, int(std::min<int64_t>(INT_MAX, n - off)));
}

// Open MPI 4 moves its nonblocking collectives on (libnbc's progress, a low-priority callback)
// at one test in eight: a test here is kTests of MPI's.
constexpr int kTests = 8;

bool test_all(int n, MPI_Request* requests) {
  int done = 0;
  for (int i = 0; i < kTests && !done; ++i) MPI_Testall(n, requests, &done, MPI_STATUSES_IGNORE);
  return done != 0;
}

// MPI's own waits spin until the messages are in: on a Pi training with --threads 4 the spin takes
// a core from the model, and under a CPU quota (an emulated host, a container's limit) it is
// charged as compute and comes out of the next step. A wait here spins only briefly (a message
// already on its way lands within microseconds), then naps between tests, each nap a
// kNapShare of the time waited so far, within [kShortestNap, kLongestNap]: a message is seen
// at most about a sixteenth of the wait after it landed, and a long wait for a slow link tests
// once a millisecond. The tests themselves move the collectives' phases on.
constexpr auto kSpin = std::chrono::microseconds(20);
constexpr int kNapShare = 16;
constexpr std::chrono::microseconds kShortestNap(10), kLongestNap(1000);

void wait_without_spinning(int n, MPI_Request* requests) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  while (clock::now() - start < kSpin)
    if (test_all(n, requests)) return;
  while (!test_all(n, requests)) {
    const auto waited = std::chrono::duration_cast<std::chrono::microseconds>(clock::now() - start);
    std::this_thread::sleep_for(
        std::clamp<std::chrono::microseconds>(waited / kNapShare, kShortestNap, kLongestNap));
  }
}

// Starts a nonblocking collective with `start` and waits for it without spinning.
template <class Start>
void collective(Start start) {
  MPI_Request request;
  start(&request);
  wait_without_spinning(1, &request);
}

}  // namespace

// Times an MPI call into mpi_seconds_ and marks this rank as waiting in MPI meanwhile (for the
// stall watchdog's report).
class Comm::InMpi {
 public:
  explicit InMpi(Comm& c) : c_(c), t0_(MPI_Wtime()) { c_.in_mpi_ = true; }
  ~InMpi() {
    c_.mpi_seconds_ += MPI_Wtime() - t0_;
    c_.in_mpi_ = false;
  }

 private:
  Comm& c_;
  double t0_;
};

Comm::Comm(MPI_Comm comm) : comm_(comm) {
  // The waits' naps end on time, not up to the kernel's default 50 us slack late.
  prctl(PR_SET_TIMERSLACK, 1000UL);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  if (size_ == 1) blocking_ = comm_;
}

Comm::~Comm() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (blocking_ != MPI_COMM_NULL && blocking_ != comm_ && !finalized) MPI_Comm_free(&blocking_);
}

// Made at the first blocking call, under its InMpi: a rank that cannot reach the others then
// stalls where the watchdog sees it, not in the constructor before any watchdog runs.
MPI_Comm Comm::blocking() {
  if (blocking_ == MPI_COMM_NULL)
    collective([&](MPI_Request* r) { MPI_Comm_idup(comm_, &blocking_, r); });
  return blocking_;
}

void Comm::broadcast(float* data, int64_t n, int root) {
  InMpi timed(*this);
  in_chunks(n, [&](int64_t off, int count) {
    collective(
        [&](MPI_Request* r) { MPI_Ibcast(data + off, count, MPI_FLOAT, root, blocking(), r); });
  });
}

void Comm::broadcast(uint64_t* data, int n, int root) {
  InMpi timed(*this);
  collective([&](MPI_Request* r) { MPI_Ibcast(data, n, MPI_UINT64_T, root, blocking(), r); });
}

void Comm::broadcast(std::string& text, int root) {
  uint64_t size = text.size();
  broadcast(&size, 1, root);
  text.resize(size_t(size));
  InMpi timed(*this);
  collective(
      [&](MPI_Request* r) { MPI_Ibcast(text.data(), int(size), MPI_CHAR, root, blocking(), r); });
}

void Comm::allreduce_sum(double* data, int64_t n) { allreduce(data, n, MPI_SUM); }
void Comm::allreduce_max(double* data, int64_t n) { allreduce(data, n, MPI_MAX); }

void Comm::allreduce(double* data, int64_t n, MPI_Op op) {
  if (size_ == 1) return;
  InMpi timed(*this);
  in_chunks(n, [&](int64_t off, int count) {
    collective([&](MPI_Request* r) {
      MPI_Iallreduce(MPI_IN_PLACE, data + off, count, MPI_DOUBLE, op, blocking(), r);
    });
  });
  bytes_sent_ += n * int64_t(sizeof(double));
  ++collectives_;
}

void Comm::start_allreduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op,
                           MPI_Request* request) {
  start_allreduce(send, recv, count, type, op, request, comm_);
}

void Comm::start_allreduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op,
                           MPI_Request* request, MPI_Comm on) {
  InMpi timed(*this);
  MPI_Iallreduce(send, recv, count, type, op, on, request);
  int size = 0;
  MPI_Type_size(type, &size);
  bytes_sent_ += int64_t(count) * size;
  ++collectives_;
}

bool Comm::progress(std::vector<MPI_Request>& requests) {
  if (requests.empty()) return true;
  InMpi timed(*this);
  return test_all(int(requests.size()), requests.data());
}

void Comm::wait_all(std::vector<MPI_Request>& requests) {
  InMpi timed(*this);
  wait_without_spinning(int(requests.size()), requests.data());
}

void Comm::wait(MPI_Request& request) {
  InMpi timed(*this);
  wait_without_spinning(1, &request);
}

void Comm::connect_all() {
  if (size_ == 1) return;
  InMpi timed(*this);
  const char out = 0;
  std::vector<char> in(size_t(size_), 0);
  std::vector<MPI_Request> requests;
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    requests.emplace_back();
    MPI_Irecv(&in[size_t(peer)], 1, MPI_CHAR, peer, kConnectTag, comm_, &requests.back());
    requests.emplace_back();
    MPI_Isend(&out, 1, MPI_CHAR, peer, kConnectTag, comm_, &requests.back());
  }
  wait_without_spinning(int(requests.size()), requests.data());
}

MPI_Comm Comm::duplicate() {
  InMpi timed(*this);
  MPI_Comm dup = MPI_COMM_NULL;
  collective([&](MPI_Request* r) { MPI_Comm_idup(comm_, &dup, r); });
  return dup;
}

int Comm::first_failed(bool ok) {
  InMpi timed(*this);
  int v = ok ? size_ : rank_;
  collective([&](MPI_Request* r) {
    MPI_Iallreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_MIN, blocking(), r);
  });
  return v;
}

bool Comm::all_equal(uint64_t value) {
  InMpi timed(*this);
  uint64_t v[2] = {value, ~value};  // the largest value, and the complement of the smallest
  collective([&](MPI_Request* r) {
    MPI_Iallreduce(MPI_IN_PLACE, v, 2, MPI_UINT64_T, MPI_MAX, blocking(), r);
  });
  return v[0] == ~v[1];
}

namespace {
constexpr const char* kIallreduceVariable = "coll_libnbc_iallreduce_algorithm";
bool user_chose_iallreduce = false;
// In effect: set before MPI_Init (prefer_rabenseifner_allreduce), then by set_allreduce_algorithm.
AllreduceAlgorithm iallreduce_algorithm = AllreduceAlgorithm::rabenseifner;
int libnbc_number(AllreduceAlgorithm algorithm) {
  return algorithm == AllreduceAlgorithm::binomial ? 2 : 3;
}
}  // namespace

void prefer_rabenseifner_allreduce() {
  const std::string env = std::string("OMPI_MCA_") + kIallreduceVariable;
  user_chose_iallreduce = std::getenv(env.c_str()) != nullptr;
  setenv(env.c_str(), std::to_string(libnbc_number(AllreduceAlgorithm::rabenseifner)).c_str(), 0);
}

const char* allreduce_algorithm_name(AllreduceAlgorithm algorithm) {
  return algorithm == AllreduceAlgorithm::binomial ? "the binomial tree" : "Rabenseifner's";
}

// MPI's tool interface lists all of Open MPI's variables on every init: tens of milliseconds of
// CPU, many more on a slow host, so only a change goes through it.
bool set_allreduce_algorithm(AllreduceAlgorithm algorithm) {
  if (user_chose_iallreduce) return false;
  if (algorithm == iallreduce_algorithm) return true;
  int provided, index, count, value = libnbc_number(algorithm);
  if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) return false;
  MPI_T_cvar_handle handle;
  bool set = MPI_T_cvar_get_index(kIallreduceVariable, &index) == MPI_SUCCESS &&
             MPI_T_cvar_handle_alloc(index, nullptr, &handle, &count) == MPI_SUCCESS;
  if (set) {
    set = count == 1 && MPI_T_cvar_write(handle, &value) == MPI_SUCCESS;
    MPI_T_cvar_handle_free(&handle);
  }
  MPI_T_finalize();
  if (set) iallreduce_algorithm = algorithm;
  return set;
}

int local_ranks() {
  const char* s = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  const int n = s ? std::atoi(s) : 1;
  return n > 0 ? n : 1;
}

void run_together(Comm& comm, const std::function<void()>& step) {
  std::string message;
  bool failed = false, usage = false;
  try {
    step();
  } catch (const std::exception& e) {  // a UsageError too: it may come from work only some ranks do
    message = failure_text(e);
    failed = true;
    usage = dynamic_cast<const UsageError*>(&e) != nullptr;
  }
  const int first = comm.first_failed(!failed);
  if (first == comm.size()) return;
  const bool first_was_usage = comm.first_failed(!usage) == first;  // the same on every rank
  // One rank speaks.
  throw JointError(comm.rank() == first ? message : "", first_was_usage ? 2 : 1);
}

}  // namespace pitrain
