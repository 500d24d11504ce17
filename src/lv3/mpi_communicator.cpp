// The Communicator over MPI_COMM_WORLD (include/deep500/dist/mpi_world.h).
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <numeric>

#include "deep500/core/error.h"
#include "deep500/dist/mpi_world.h"
#include "mpi_calls.h"
#include "mpi_watchdog.h"

namespace d5 {

namespace {

using mpi_calls::check;
using mpi_calls::mpi_count;
using mpi_calls::mpi_op;
using mpi_calls::mpi_type;

std::vector<int> int_counts(const std::vector<int64_t>& counts) {
  std::vector<int> out;
  for (int64_t c : counts) out.push_back(mpi_count(c));
  return out;
}

std::vector<int> displacements(const std::vector<int>& counts) {
  std::vector<int> d(counts.size(), 0);
  for (size_t i = 1; i < counts.size(); ++i) d[i] = d[i - 1] + counts[i - 1];
  return d;
}

class MpiRequest : public CommRequest {
 public:
  MpiRequest(const char* call, int rank) : call_(call), rank_(rank) {}
  MPI_Request* handle() { return &request_; }
  ~MpiRequest() override {
    if (!done() && request_ != MPI_REQUEST_NULL) MPI_Wait(&request_, MPI_STATUS_IGNORE);
  }

 protected:
  void do_wait() override { check(MPI_Wait(&request_, MPI_STATUS_IGNORE), call_, rank_); }
  bool do_test() override {
    int flag = 0;
    check(MPI_Test(&request_, &flag, MPI_STATUS_IGNORE), call_, rank_);
    return flag != 0;
  }

 private:
  MPI_Request request_ = MPI_REQUEST_NULL;
  const char* call_;
  int rank_;
};

class MpiCommunicator : public Communicator {
 public:
  MpiCommunicator(MPI_Comm comm, int rank, int size) : Communicator(size), comm_(comm), rank_(rank), size_(size) {}
  std::string name() const override { return "mpi"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

 protected:
  void do_allreduce(void* data, int64_t count, DType dtype, ReduceOp op) override {
    check(MPI_Allreduce(MPI_IN_PLACE, data, mpi_count(count), mpi_type(dtype), mpi_op(op), comm_), "MPI_Allreduce",
          rank_);
  }
  CommRequestPtr do_iallreduce(void* data, int64_t count, DType dtype, ReduceOp op) override {
    auto r = std::make_unique<MpiRequest>("MPI_Iallreduce", rank_);
    check(MPI_Iallreduce(MPI_IN_PLACE, data, mpi_count(count), mpi_type(dtype), mpi_op(op), comm_, r->handle()),
          "MPI_Iallreduce", rank_);
    return r;
  }
  void do_broadcast(void* data, int64_t count, DType dtype, int root) override {
    check(MPI_Bcast(data, mpi_count(count), mpi_type(dtype), root, comm_), "MPI_Bcast", rank_);
  }
  CommRequestPtr do_ibroadcast(void* data, int64_t count, DType dtype, int root) override {
    auto r = std::make_unique<MpiRequest>("MPI_Ibcast", rank_);
    check(MPI_Ibcast(data, mpi_count(count), mpi_type(dtype), root, comm_, r->handle()), "MPI_Ibcast", rank_);
    return r;
  }
  void do_gatherv(const void* send, int64_t count, DType dtype, void* recv, const std::vector<int64_t>& counts,
                  int root) override {
    std::vector<int> c, d;
    if (rank_ == root) {
      c = int_counts(counts);
      d = displacements(c);
    }
    check(MPI_Gatherv(send, mpi_count(count), mpi_type(dtype), recv, c.data(), d.data(), mpi_type(dtype), root,
                      comm_),
          "MPI_Gatherv", rank_);
  }
  void do_allgatherv(const void* send, int64_t count, DType dtype, void* recv,
                     const std::vector<int64_t>& counts) override {
    const std::vector<int> c = int_counts(counts);
    const std::vector<int> d = displacements(c);
    check(MPI_Allgatherv(send, mpi_count(count), mpi_type(dtype), recv, c.data(), d.data(), mpi_type(dtype), comm_),
          "MPI_Allgatherv", rank_);
  }
  void do_scatter(const void* send, int64_t count, DType dtype, void* recv, int root) override {
    check(MPI_Scatter(send, mpi_count(count), mpi_type(dtype), recv, mpi_count(count), mpi_type(dtype), root, comm_),
          "MPI_Scatter", rank_);
  }
  void do_barrier() override { check(MPI_Barrier(comm_), "MPI_Barrier", rank_); }
  CommRequestPtr do_isend(const void* data, int64_t count, DType dtype, int peer, int tag) override {
    auto r = std::make_unique<MpiRequest>("MPI_Isend", rank_);
    check(MPI_Isend(data, mpi_count(count), mpi_type(dtype), peer, tag, comm_, r->handle()), "MPI_Isend", rank_);
    return r;
  }
  CommRequestPtr do_irecv(void* data, int64_t count, DType dtype, int peer, int tag) override {
    auto r = std::make_unique<MpiRequest>("MPI_Irecv", rank_);
    check(MPI_Irecv(data, mpi_count(count), mpi_type(dtype), peer, tag, comm_, r->handle()), "MPI_Irecv", rank_);
    return r;
  }
  int do_recv_any(void* data, int64_t count, DType dtype, int tag) override {
    MPI_Status status;
    check(MPI_Recv(data, mpi_count(count), mpi_type(dtype), MPI_ANY_SOURCE, tag, comm_, &status), "MPI_Recv",
          rank_);
    return status.MPI_SOURCE;
  }

 private:
  MPI_Comm comm_;
  int rank_, size_;
};

constexpr double kDefaultWatchdogSeconds = 20;
double requested_watchdog_s = -1;  // -1: not set by the program; the environment or the default decides
double active_watchdog_s = 0;
// Never destroyed: the atexit handler stops it before MPI_Finalize, whatever the order of static
// destruction.
MpiWatchdog* watchdog = nullptr;

double watchdog_seconds_wanted() {
  if (requested_watchdog_s >= 0) return requested_watchdog_s;
  if (const char* env = std::getenv("D5_WATCHDOG_TIMEOUT")) {
    char* end = nullptr;
    const double s = std::strtod(env, &end);
    D5_CHECK_ARG(end != env && *end == '\0' && s >= 0,
                 "D5_WATCHDOG_TIMEOUT={} is not a number of seconds (0 turns the watchdog off)", env);
    return s;
  }
  return kDefaultWatchdogSeconds;
}

void finalize_at_exit() {
  if (watchdog != nullptr) watchdog->stop();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

}  // namespace

bool mpi_built() { return true; }

bool launched_by_mpi_launcher() {
  // Open MPI, MPICH / Hydra (PMI), PMIx launchers and Slurm's srun.
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "SLURM_STEP_NUM_TASKS"}) {
    if (std::getenv(v) != nullptr) return true;
  }
  return false;
}

namespace {
std::mutex world_mutex;
std::shared_ptr<Communicator> world;
}  // namespace

bool mpi_world_is_distributed() {
  std::lock_guard<std::mutex> lock(world_mutex);
  return world && world->size() > 1;
}

void set_mpi_watchdog_timeout(double seconds) {
  D5_CHECK_ARG(seconds >= 0, "the watchdog timeout is {} s; give a positive number of seconds, or 0 for none",
               seconds);
  std::lock_guard<std::mutex> lock(world_mutex);
  D5_CHECK(!world, InvalidArgument, "the watchdog timeout must be set before the MPI world is created");
  requested_watchdog_s = seconds;
}

double mpi_watchdog_timeout() {
  std::lock_guard<std::mutex> lock(world_mutex);
  return active_watchdog_s;
}

void abort_world(int code) {
  if (!mpi_world_is_distributed()) return;
  MPI_Abort(MPI_COMM_WORLD, code == 0 ? 1 : code);
}

std::shared_ptr<Communicator> mpi_world() {
  std::lock_guard<std::mutex> lock(world_mutex);
  if (world) return world;
  const double watchdog_s = watchdog_seconds_wanted();
  int initialized = 0;
  MPI_Initialized(&initialized);
  int provided = MPI_THREAD_SINGLE;
  if (!initialized) {
    // The watchdog's thread calls MPI while the main thread is inside a collective.
    const int wanted = watchdog_s > 0 ? MPI_THREAD_MULTIPLE : MPI_THREAD_FUNNELED;
    check(MPI_Init_thread(nullptr, nullptr, wanted, &provided), "MPI_Init_thread", -1);
    std::atexit(finalize_at_exit);
  } else {
    MPI_Query_thread(&provided);
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size > 1 && watchdog_s > 0) {
    // Every rank reads the same setting, so every rank takes this branch: the constructor is collective.
    if (provided >= MPI_THREAD_MULTIPLE) {
      // Ten heartbeats per timeout, at most one a second: a late beat or two is no alarm.
      watchdog = new MpiWatchdog(MPI_COMM_WORLD, watchdog_s, std::clamp(watchdog_s / 10, 0.05, 1.0));
      active_watchdog_s = watchdog_s;
    } else if (rank == 0) {
      std::fprintf(stderr,
                   "d5: this MPI gives thread level %d, not MPI_THREAD_MULTIPLE: no watchdog, and a stopped rank "
                   "can leave the others waiting\n",
                   provided);
    }
  }
  world = std::make_shared<MpiCommunicator>(MPI_COMM_WORLD, rank, size);
  return world;
}

}  // namespace d5
