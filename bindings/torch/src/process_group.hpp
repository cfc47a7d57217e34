// nexar's torch.distributed backend (docs/torch.md): a c10d::ProcessGroup
// over nexar's public C API. Every operation starts nexar non-blocking
// requests and returns a WorkNexar; one progress thread per process group
// completes them (nexar_test), so that Work futures, and the callbacks DDP
// chains on them, run without anybody waiting; a caller of Work::wait()
// completes its own work (nexar_wait) without waiting for that thread.
#pragma once

#include <nexar.h>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace nexar_torch {

// One operation: the nexar requests it started, the tensors they read and
// write (held until they complete), and a step that runs once they all
// succeeded (copying a staging buffer into the caller's tensors).
class WorkNexar : public c10d::Work {
 public:
  WorkNexar(int rank, c10d::OpType type, std::string what,
            std::vector<at::Tensor> outputs);
  ~WorkNexar() override;

  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  void synchronize() override {}
  int sourceRank() const override;
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override {
    return future_;
  }

  // Completes the work when its requests are done. |block|: nexar_wait on
  // each (bounded by NEXAR_OP_TIMEOUT_MS), else nexar_test, skipped when
  // another thread is driving it. Returns true once the work is complete.
  bool drive(bool block);

  // Filled by the process group before the work is handed out.
  nexar_comm_t *comm = nullptr;
  std::atomic<bool> *fatal = nullptr;  // set on an error fatal to the group
  std::vector<nexar_req_t *> reqs;
  std::vector<at::Tensor> keep;
  std::function<void()> on_success;
  std::string error;  // an error met while starting the requests

 private:
  void complete();

  std::mutex drive_mutex_;  // one thread at a time tests/waits the requests
  size_t next_ = 0;         // requests before it are done
  bool done_ = false;
  int source_ = -1;
  std::string what_;  // "allreduce of tensors[0] (float32, 10 elements)"
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

class ProcessGroupNexar : public c10d::ProcessGroup {
 public:
  // Joins (or forms) a nexar cluster for this group through |store|
  // (docs/torch.md, "Rendezvous"), then starts the progress thread.
  ProcessGroupNexar(const c10::intrusive_ptr<c10d::Store> &store, int rank,
                    int size, std::chrono::milliseconds timeout);
  ~ProcessGroupNexar() override;

  const std::string getBackendName() const override { return "nexar"; }

  c10::intrusive_ptr<c10d::Work> broadcast(
      std::vector<at::Tensor> &tensors,
      const c10d::BroadcastOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(
      std::vector<at::Tensor> &tensors,
      const c10d::AllreduceOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor> &tensors,
      const c10d::AllreduceCoalescedOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(
      std::vector<at::Tensor> &tensors,
      const c10d::ReduceOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(
      std::vector<std::vector<at::Tensor>> &outputs,
      std::vector<at::Tensor> &inputs,
      const c10d::AllgatherOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(
      at::Tensor &output, at::Tensor &input,
      const c10d::AllgatherOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> gather(
      std::vector<std::vector<at::Tensor>> &outputs,
      std::vector<at::Tensor> &inputs,
      const c10d::GatherOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(
      std::vector<at::Tensor> &outputs,
      std::vector<std::vector<at::Tensor>> &inputs,
      const c10d::ScatterOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(
      std::vector<at::Tensor> &outputs,
      std::vector<std::vector<at::Tensor>> &inputs,
      const c10d::ReduceScatterOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor &output, at::Tensor &input,
      const c10d::ReduceScatterOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(
      std::vector<at::Tensor> &outputs, std::vector<at::Tensor> &inputs,
      const c10d::AllToAllOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(
      at::Tensor &output, at::Tensor &input, std::vector<int64_t> &outputSplits,
      std::vector<int64_t> &inputSplits,
      const c10d::AllToAllOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> barrier(
      const c10d::BarrierOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor> &tensors, int dst,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor> &tensors, int src,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor> &tensors,
                                               int tag) override;

  // The Python creator registered with Backend.register_backend.
  static c10::intrusive_ptr<c10d::ProcessGroup> create(
      const c10::intrusive_ptr<c10d::Store> &store, int rank, int size,
      std::chrono::milliseconds timeout);

  // nexar_abort on every live group of this process: their peers fail at
  // once instead of waiting (nexar.torch calls it on an uncaught exception).
  static void abortAll();
  // Stops the progress thread of every live group (nexar.torch calls it at
  // interpreter exit, so that no thread of ours frees a Python-owned tensor
  // while Python finalizes); operations started later complete only in
  // Work::wait().
  static void shutdownAll();

 private:
  using Start = std::function<int(nexar_req_t **)>;
  // Makes a work, starts |starts| (one nexar request each) and queues it
  // for the progress thread. A failure of the first start throws (nothing
  // runs); of a later one, the work completes with that error.
  c10::intrusive_ptr<c10d::Work> launch(
      c10d::OpType type, const std::string &what,
      std::vector<at::Tensor> outputs, std::vector<at::Tensor> keep,
      const std::vector<Start> &starts,
      std::function<void()> on_success = nullptr);
  [[noreturn]] void fail(const std::string &what, int rc) const;
  void progressLoop();
  void stopProgress();

  nexar_ctx_t *ctx_ = nullptr;      // owned; finalized by the destructor
  std::atomic<bool> fatal_{false};  // then abort before finalizing
  nexar_comm_t *comm_ = nullptr;
  bool cuda_ = false;  // CUDA tensors are staged by nexar's CUDA adapter

  std::mutex queue_mutex_;
  std::condition_variable queue_cv_;
  std::vector<c10::intrusive_ptr<WorkNexar>> queue_;  // new, for the thread
  bool stop_ = false;
  std::thread progress_;
};

// Rendezvous (rendezvous.cpp): fills |ctx| with a context of |size| ranks
// in which this process has |rank|. Throws a c10::Error naming the step.
nexar_ctx_t *rendezvous(c10d::Store &store, int rank, int size,
                        std::chrono::milliseconds timeout);

}  // namespace nexar_torch
