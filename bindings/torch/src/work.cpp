// WorkNexar and the progress thread (docs/torch.md, "Completion").
#include "process_group.hpp"

#include <c10/util/Exception.h>

#include <algorithm>

namespace nexar_torch {

namespace {

std::string nexarError(nexar_comm_t *comm, int rc) {
  const char *msg = comm ? nexar_comm_last_error(comm) : nexar_last_error();
  std::string text = msg && *msg ? msg : nexar_strerror(rc);
  return text + " (" + nexar_err_name(rc) + ")";
}

}  // namespace

WorkNexar::WorkNexar(int rank, c10d::OpType type, std::string what,
                     std::vector<at::Tensor> outputs)
    : c10d::Work(rank, type),
      what_(std::move(what)),
      outputs_(std::move(outputs)),
      future_(c10::make_intrusive<c10::ivalue::Future>(
          c10::ListType::create(c10::TensorType::get()))) {}

WorkNexar::~WorkNexar() {
  // Only a work whose start failed part way can hold requests here (the
  // progress thread keeps the others alive until they are done).
  drive(true);
}

int WorkNexar::sourceRank() const {
  std::lock_guard<std::mutex> g(mutex_);
  return source_;
}

bool WorkNexar::drive(bool block) {
  std::unique_lock<std::mutex> g(drive_mutex_, std::defer_lock);
  if (block)
    g.lock();
  else if (!g.try_lock())
    return false;
  if (done_) return true;
  for (; next_ < reqs.size(); next_++) {
    nexar_status_t st{};
    int finished = 1;
    int rc = block ? nexar_wait(&reqs[next_], &st)
                   : nexar_test(&reqs[next_], &finished, &st);
    if (!finished) return false;
    if (rc != NEXAR_OK && error.empty()) error = nexarError(comm, rc);
    if (rc != NEXAR_OK && nexar_err_is_fatal(rc) && fatal) *fatal = true;
    if (rc == NEXAR_OK) {
      std::lock_guard<std::mutex> s(mutex_);
      source_ = st.source;
    }
  }
  complete();
  return true;
}

void WorkNexar::complete() {
  if (error.empty() && on_success) {
    try {
      on_success();
    } catch (const std::exception &e) {
      error = e.what();
    }
  }
  done_ = true;
  keep.clear();
  on_success = nullptr;
  // Work::finish first: whoever sees the future done sees the work done.
  if (error.empty()) {
    finish();
    future_->markCompleted(c10::IValue(outputs_));
    return;
  }
  auto eptr = std::make_exception_ptr(
      std::runtime_error("nexar backend: rank " + std::to_string(rank_) + ": " +
                         what_ + " failed: " + error));
  finish(eptr);
  future_->setError(eptr);
}

bool WorkNexar::wait(std::chrono::milliseconds timeout) {
  if (timeout == kNoTimeout)
    drive(true);  // on this thread: no wait for the progress thread
  return c10d::Work::wait(timeout);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNexar::launch(
    c10d::OpType type, const std::string &what, std::vector<at::Tensor> outputs,
    std::vector<at::Tensor> keep, const std::vector<Start> &starts,
    std::function<void()> on_success) {
  auto work =
      c10::make_intrusive<WorkNexar>(rank_, type, what, std::move(outputs));
  work->comm = comm_;
  work->fatal = &fatal_;
  work->keep = std::move(keep);
  work->on_success = std::move(on_success);
  for (const Start &start : starts) {
    nexar_req_t *req = nullptr;
    int rc = start(&req);
    if (rc != NEXAR_OK) {
      if (work->reqs.empty()) fail(what, rc);
      work->error = nexarError(comm_, rc);
      break;
    }
    work->reqs.push_back(req);
  }
  {
    std::lock_guard<std::mutex> g(queue_mutex_);
    queue_.push_back(work);
  }
  queue_cv_.notify_one();
  return work;
}

void ProcessGroupNexar::fail(const std::string &what, int rc) const {
  std::string msg = "nexar backend: rank " + std::to_string(rank_) + ": " +
                    what + ": " + nexarError(comm_, rc);
  if (rc == NEXAR_ERR_INVALID_ARG) TORCH_CHECK_VALUE(false, msg);
  if (rc == NEXAR_ERR_UNSUPPORTED) TORCH_CHECK_TYPE(false, msg);
  TORCH_CHECK(false, msg);
}

// Tests the outstanding works, oldest first, and sleeps between rounds
// that completed nothing: 8 us doubling up to 256 us, back to 0 once a
// work completes or a new one arrives. It never waits inside nexar, so a
// receive that completes late holds up no other work.
void ProcessGroupNexar::progressLoop() {
  std::vector<c10::intrusive_ptr<WorkNexar>> pending;
  auto pause = std::chrono::microseconds(0);
  for (;;) {
    bool stopping;
    {
      std::unique_lock<std::mutex> g(queue_mutex_);
      auto ready = [&] { return stop_ || !queue_.empty(); };
      if (pending.empty())
        queue_cv_.wait(g, ready);
      else if (pause.count() > 0)
        queue_cv_.wait_for(g, pause, ready);
      if (!queue_.empty()) pause = std::chrono::microseconds(0);
      for (auto &w : queue_) pending.push_back(std::move(w));
      queue_.clear();
      stopping = stop_;
    }
    bool progressed = false;
    auto it = std::remove_if(pending.begin(), pending.end(), [&](auto &w) {
      bool done = w->drive(stopping);
      progressed |= done;
      return done;
    });
    pending.erase(it, pending.end());
    if (stopping && pending.empty()) return;
    if (progressed)
      pause = std::chrono::microseconds(0);
    else
      pause = std::min(std::max(pause * 2, std::chrono::microseconds(8)),
                       std::chrono::microseconds(256));
  }
}

}  // namespace nexar_torch
