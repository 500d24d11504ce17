#pragma once
// A communicator of one rank for tests that need no MPI: every collective leaves the data where it
// is (a reduction over one rank), and a gather or scatter copies the one rank's part.
#include <cstring>
#include <string>
#include <vector>

#include "deep500/dist/communicator.h"

namespace d5::test {

class OneRank : public Communicator {
 public:
  OneRank() : Communicator(1) {}
  std::string name() const override { return "one rank"; }
  int rank() const override { return 0; }
  int size() const override { return 1; }

 protected:
  void do_allreduce(void*, int64_t, DType, ReduceOp) override {}
  CommRequestPtr do_iallreduce(void*, int64_t, DType, ReduceOp) override { return nullptr; }
  void do_broadcast(void*, int64_t, DType, int) override {}
  CommRequestPtr do_ibroadcast(void*, int64_t, DType, int) override { return nullptr; }
  void do_gatherv(const void* send, int64_t count, DType dtype, void* recv, const std::vector<int64_t>&, int) override {
    copy(send, count, dtype, recv);
  }
  void do_allgatherv(const void* send, int64_t count, DType dtype, void* recv, const std::vector<int64_t>&) override {
    copy(send, count, dtype, recv);
  }
  void do_scatter(const void* send, int64_t count, DType dtype, void* recv, int) override {
    copy(send, count, dtype, recv);
  }
  void do_barrier() override {}
  CommRequestPtr do_isend(const void*, int64_t, DType, int, int) override { return nullptr; }
  CommRequestPtr do_irecv(void*, int64_t, DType, int, int) override { return nullptr; }
  int do_recv_any(void*, int64_t, DType, int) override { return 0; }

 private:
  static void copy(const void* send, int64_t count, DType dtype, void* recv) {
    if (send != recv) std::memcpy(recv, send, static_cast<size_t>(count) * dtype_size(dtype));
  }
};

}  // namespace d5::test
