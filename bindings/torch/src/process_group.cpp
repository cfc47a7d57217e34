// The operations of ProcessGroupNexar: argument checks, then one nexar
// non-blocking call per tensor (docs/torch.md, "Operations").
#include <Python.h>  // first, as Python asks

#include "process_group.hpp"

#include <ATen/Context.h>
#include <c10/util/Exception.h>

#include <set>

namespace nexar_torch {

namespace {
std::mutex g_groups_mutex;  // the live groups, for abortAll
std::set<ProcessGroupNexar *> g_groups;
}  // namespace

namespace {

using c10d::OpType;

// A tensor as nexar sees it: a pointer, a count of elements of |dtype|.
// Tensors of a type nexar cannot reduce (bool, int16, complex) move as
// bytes in the operations that only copy data.
struct Buf {
  void *ptr;
  size_t count;
  nexar_dtype_t dtype;
};

bool nexarDtype(at::ScalarType s, nexar_dtype_t *out) {
  switch (s) {
    case at::kByte:
      *out = NEXAR_UINT8;
      return true;
    case at::kChar:
      *out = NEXAR_INT8;
      return true;
    case at::kInt:
      *out = NEXAR_INT32;
      return true;
    case at::kLong:
      *out = NEXAR_INT64;
      return true;
    case at::kHalf:
      *out = NEXAR_FLOAT16;
      return true;
    case at::kFloat:
      *out = NEXAR_FLOAT32;
      return true;
    case at::kDouble:
      *out = NEXAR_FLOAT64;
      return true;
    case at::kBFloat16:
      *out = NEXAR_BFLOAT16;
      return true;
    default:
      return false;
  }
}

std::string where(int rank, const std::string &op) {
  return "nexar backend: rank " + std::to_string(rank) + ": " + op;
}

std::string describe(const std::string &op, const std::string &name,
                     const at::Tensor &t) {
  return op + " of " + name + " (" + c10::toString(t.scalar_type()) + ", " +
         std::to_string(t.numel()) + " elements)";
}

// Elements of the nexar datatype per tensor element: 1, or the element
// size for a tensor moved as bytes.
size_t unitOf(const at::Tensor &t) {
  nexar_dtype_t dt;
  return nexarDtype(t.scalar_type(), &dt) ? 1 : t.element_size();
}

Buf moveBuf(const at::Tensor &t) {
  Buf b{t.data_ptr(), static_cast<size_t>(t.numel()), NEXAR_UINT8};
  if (!nexarDtype(t.scalar_type(), &b.dtype)) b.count = t.nbytes();
  return b;
}

nexar_op_t reduceOp(int rank, const std::string &op, const c10d::ReduceOp &r) {
  switch (r.op_) {
    case c10d::ReduceOp::SUM:
      return NEXAR_SUM;
    case c10d::ReduceOp::AVG:
      return NEXAR_AVG;
    case c10d::ReduceOp::PRODUCT:
      return NEXAR_PROD;
    case c10d::ReduceOp::MIN:
      return NEXAR_MIN;
    case c10d::ReduceOp::MAX:
      return NEXAR_MAX;
    case c10d::ReduceOp::BAND:
      return NEXAR_BAND;
    case c10d::ReduceOp::BOR:
      return NEXAR_BOR;
    case c10d::ReduceOp::BXOR:
      return NEXAR_BXOR;
    default:
      TORCH_CHECK_VALUE(false, where(rank, op), ": reduce op ",
                        static_cast<int>(r.op_),
                        " is not supported (SUM, AVG, PRODUCT, MIN, MAX, BAND, "
                        "BOR, BXOR are)");
  }
}

}  // namespace

// Argument checks shared by every operation; each error names the rank,
// the operation and the tensor, and is raised before anything starts.
struct Checker {
  int rank;
  int size;
  bool cuda;
  std::string op;

  std::string at() const { return where(rank, op); }

  void tensor(const std::string &name, const at::Tensor &t) const {
    TORCH_CHECK_VALUE(t.defined(), at(), ": ", name, " is undefined");
    TORCH_CHECK_TYPE(t.layout() == at::kStrided, at(), ": ", name, " has ",
                     t.layout(), " layout; only dense tensors are supported");
    if (t.is_cuda()) {
      TORCH_CHECK_TYPE(cuda, at(), ": ", name, " is on ", t.device(),
                       " but nexar's CUDA adapter is not in use (torch "
                       "without CUDA, or libnexar built with NEXAR_CUDA=OFF)");
    } else {
      TORCH_CHECK_TYPE(t.is_cpu(), at(), ": ", name, " is on ", t.device(),
                       "; supported devices: cpu", cuda ? ", cuda" : "");
    }
    TORCH_CHECK_VALUE(t.is_contiguous(), at(), ": ", name,
                      " is not contiguous (sizes ", t.sizes(), ", strides ",
                      t.strides(), "); pass tensor.contiguous()");
  }

  const at::Tensor &single(std::vector<at::Tensor> &tensors,
                           const char *name = "tensors") const {
    TORCH_CHECK_VALUE(tensors.size() == 1, at(), ": ", name,
                      " must hold exactly one tensor, not ", tensors.size());
    tensor(std::string(name) + "[0]", tensors[0]);
    return tensors[0];
  }

  // |t| must be |ref|'s dtype and device, with |numel| elements.
  void like(const std::string &name, const at::Tensor &t,
            const std::string &ref_name, const at::Tensor &ref,
            int64_t numel) const {
    tensor(name, t);
    TORCH_CHECK_TYPE(
        t.scalar_type() == ref.scalar_type() && t.device() == ref.device(),
        at(), ": ", name, " is ", t.scalar_type(), " on ", t.device(), " but ",
        ref_name, " is ", ref.scalar_type(), " on ", ref.device());
    TORCH_CHECK_VALUE(t.numel() == numel, at(), ": ", name, " has ", t.numel(),
                      " elements, expected ", numel, " (", ref_name, " has ",
                      ref.numel(), ", world size ", size, ")");
  }

  Buf reduceBuf(const std::string &name, const at::Tensor &t) const {
    Buf b{t.data_ptr(), static_cast<size_t>(t.numel()), NEXAR_UINT8};
    TORCH_CHECK_TYPE(nexarDtype(t.scalar_type(), &b.dtype), at(), ": ", name,
                     " has dtype ", t.scalar_type(),
                     ", which nexar cannot reduce (uint8, int8, int32, int64, "
                     "float16, bfloat16, float32, float64)");
    return b;
  }

  int root(int64_t r) const {
    TORCH_CHECK_VALUE(r >= 0 && r < size, at(), ": root ", r, " is outside 0..",
                      size - 1);
    return static_cast<int>(r);
  }

  int peer(int r, const char *what) const {
    TORCH_CHECK_VALUE(r >= 0 && r < size, at(), ": ", what, " rank ", r,
                      " is outside 0..", size - 1);
    return r;
  }

  int tag(int t) const {
    TORCH_CHECK_VALUE(t >= 0, at(), ": tag ", t, " is negative");
    return t;
  }

  // A list of world-size tensors like |ref| (each |numel| elements).
  void list(const std::string &name, const std::vector<at::Tensor> &ts,
            const std::string &ref_name, const at::Tensor &ref,
            int64_t numel) const {
    TORCH_CHECK_VALUE(ts.size() == static_cast<size_t>(size), at(), ": ", name,
                      " holds ", ts.size(), " tensors, not the world size ",
                      size);
    for (size_t i = 0; i < ts.size(); i++)
      like(name + "[" + std::to_string(i) + "]", ts[i], ref_name, ref, numel);
  }
};

namespace {

at::Tensor flatCat(const std::vector<at::Tensor> &ts) {
  std::vector<at::Tensor> flat;
  for (const auto &t : ts) flat.push_back(t.reshape({-1}));
  return at::cat(flat);
}

// Copies the consecutive blocks of |flat| into |outs|.
std::function<void()> scatterInto(at::Tensor flat,
                                  std::vector<at::Tensor> outs) {
  return [flat, outs]() mutable {
    int64_t at = 0;
    for (auto &out : outs) {
      out.copy_(flat.narrow(0, at, out.numel()).view(out.sizes()));
      at += out.numel();
    }
  };
}

}  // namespace

#define CHECKER(name)         \
  Checker chk {               \
    rank_, size_, cuda_, name \
  }

c10::intrusive_ptr<c10d::Work> ProcessGroupNexar::broadcast(
    std::vector<at::Tensor> &tensors, const c10d::BroadcastOptions &opts) {
  CHECKER("broadcast");
  const at::Tensor &t = chk.single(tensors);
  int root = chk.root(opts.rootRank);
  TORCH_CHECK_VALUE(opts.rootTensor == 0, chk.at(), ": rootTensor must be 0");
  Buf b = moveBuf(t);
  return launch(OpType::BROADCAST, describe(chk.op, "tensors[0]", t), tensors,
                tensors, {[=](nexar_req_t **r) {
                  return nexar_ibcast(comm_, b.ptr, b.count, b.dtype, root, r);
                }});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNexar::allreduce(
    std::vector<at::Tensor> &tensors, const c10d::AllreduceOptions &opts) {
  CHECKER("allreduce");
  const at::Tensor &t = chk.single(tensors);
  nexar_op_t op = reduceOp(rank_, chk.op, opts.reduceOp);
  Buf b = chk.reduceBuf("tensors[0]", t);
  return launch(OpType::ALLREDUCE, describe(chk.op, "tensors[0]", t), tensors,
                tensors, {[=](nexar_req_t **r) {
                  return nexar_iallreduce(comm_, NEXAR_IN_PLACE, b.ptr, b.count,
                                          b.dtype, op, r);
                }});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNexar::allreduce_coalesced(
    std::vector<at::Tensor> &tensors,
    const c10d::AllreduceCoalescedOptions &opts) {
  CHECKER("allreduce_coalesced");
  nexar_op_t op = reduceOp(rank_, chk.op, opts.reduceOp);
  std::vector<Start> starts;
  for (size_t i = 0; i < tensors.size(); i++) {
    std::string name = "tensors[" + std::to_string(i) + "]";
    chk.tensor(name, tensors[i]);
    Buf b = chk.reduceBuf(name, tensors[i]);
    starts.push_back([=](nexar_req_t **r) {
      return nexar_iallreduce(comm_, NEXAR_IN_PLACE, b.ptr, b.count, b.dtype,
                              op, r);
    });
  }
  return launch(OpType::ALLREDUCE_COALESCED,
                chk.op + " of " + std::to_string(tensors.size()) + " tensors",
                tensors, tensors, starts);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNexar::reduce(
    std::vector<at::Tensor> &tensors, const c10d::ReduceOptions &opts) {
  CHECKER("reduce");
  const at::Tensor &t = chk.single(tensors);
  int root = chk.root(opts.rootRank);
  TORCH_CHECK_VALUE(opts.rootTensor == 0, chk.at(), ": rootTensor must be 0");
  nexar_op_t op = reduceOp(rank_, chk.op, opts.reduceOp);
  Buf b = chk.reduceBuf("tensors[0]", t);
  bool is_root = root == rank_;
  return launch(OpType::REDUCE, describe(chk.op, "tensors[0]", t), tensors,
                tensors, {[=](nexar_req_t **r) {
                  return nexar_ireduce(comm_, is_root ? NEXAR_IN_PLACE : b.ptr,
                                       is_root ? b.ptr : nullptr, b.count,
                                       b.dtype, op, root, r);
                }});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNexar::allgather(
    std::vector<std::vector<at::Tensor>> &outputs,
    std::vector<at::Tensor> &inputs, const c10d::AllgatherOptions &) {
  CHECKER("allgather");
  const at::Tensor &in = chk.single(inputs, "inputs");
  TORCH_CHECK_VALUE(outputs.size() == 1, chk.at(),
                    ": outputs must hold one list of tensors, not ",
                    outputs.size());
  chk.list("outputs[0]", outputs[0], "inputs[0]", in, in.numel());
  at::Tensor flat = at::empty({size_ * in.numel()}, in.options());
  Buf b = moveBuf(in);
  void *dst = flat.data_ptr();
  return launch(OpType::ALLGATHER, describe(chk.op, "inputs[0]", in),
                outputs[0], {in, flat}, {[=](nexar_req_t **r) {
                  return nexar_iallgather(comm_, b.ptr, dst, b.count, b.dtype,
                                          r);
                }},
                scatterInto(flat, outputs[0]));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNexar::_allgather_base(
    at::Tensor &output, at::Tensor &input, const c10d::AllgatherOptions &) {
  CHECKER("_allgather_base");
  chk.tensor("input", input);
  chk.like("output", output, "input", input, size_ * input.numel());
  Buf b = moveBuf(input);
  void *dst = output.data_ptr();
  return launch(OpType::_ALLGATHER_BASE, describe(chk.op, "input", input),
                {output}, {input, output}, {[=](nexar_req_t **r) {
                  return nexar_iallgather(comm_, b.ptr, dst, b.count, b.dtype,
                                          r);
                }});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNexar::gather(
    std::vector<std::vector<at::Tensor>> &outputs,
    std::vector<at::Tensor> &inputs, const c10d::GatherOptions &opts) {
  CHECKER("gather");
  const at::Tensor &in = chk.single(inputs, "inputs");
  int root = chk.root(opts.rootRank);
  Buf b = moveBuf(in);
  if (rank_ != root) {
    TORCH_CHECK_VALUE(
        outputs.empty() || (outputs.size() == 1 && outputs[0].empty()),
        chk.at(),
        ": outputs must be empty on a rank other than "
        "the root ",
        root);
    return launch(OpType::GATHER, describe(chk.op, "inputs[0]", in), {}, {in},
                  {[=](nexar_req_t **r) {
                    return nexar_igather(comm_, b.ptr, nullptr, b.count,
                                         b.dtype, root, r);
                  }});
  }
  TORCH_CHECK_VALUE(outputs.size() == 1, chk.at(),
                    ": outputs must hold one list of tensors at the root, not ",
                    outputs.size());
  chk.list("outputs[0]", outputs[0], "inputs[0]", in, in.numel());
  at::Tensor flat = at::empty({size_ * in.numel()}, in.options());
  void *dst = flat.data_ptr();
  return launch(OpType::GATHER, describe(chk.op, "inputs[0]", in), outputs[0],
                {in, flat}, {[=](nexar_req_t **r) {
                  return nexar_igather(comm_, b.ptr, dst, b.count, b.dtype,
                                       root, r);
                }},
                scatterInto(flat, outputs[0]));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNexar::scatter(
    std::vector<at::Tensor> &outputs,
    std::vector<std::vector<at::Tensor>> &inputs,
    const c10d::ScatterOptions &opts) {
  CHECKER("scatter");
  const at::Tensor &out = chk.single(outputs, "outputs");
  int root = chk.root(opts.rootRank);
  Buf b = moveBuf(out);
  at::Tensor flat;
  if (rank_ == root) {
    TORCH_CHECK_VALUE(inputs.size() == 1, chk.at(),
                      ": inputs must hold one list of tensors at the root, "
                      "not ",
                      inputs.size());
    chk.list("inputs[0]", inputs[0], "outputs[0]", out, out.numel());
    flat = flatCat(inputs[0]);
  } else {
    TORCH_CHECK_VALUE(
        inputs.empty() || (inputs.size() == 1 && inputs[0].empty()), chk.at(),
        ": inputs must be empty on a rank other than "
        "the root ",
        root);
  }
  void *src = flat.defined() ? flat.data_ptr() : nullptr;
  std::vector<at::Tensor> keep{out};
  if (flat.defined()) keep.push_back(flat);
  return launch(OpType::SCATTER, describe(chk.op, "outputs[0]", out), outputs,
                keep, {[=](nexar_req_t **r) {
                  return nexar_iscatter(comm_, src, b.ptr, b.count, b.dtype,
                                        root, r);
                }});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNexar::reduce_scatter(
    std::vector<at::Tensor> &outputs,
    std::vector<std::vector<at::Tensor>> &inputs,
    const c10d::ReduceScatterOptions &opts) {
  CHECKER("reduce_scatter");
  const at::Tensor &out = chk.single(outputs, "outputs");
  nexar_op_t op = reduceOp(rank_, chk.op, opts.reduceOp);
  Buf b = chk.reduceBuf("outputs[0]", out);
  TORCH_CHECK_VALUE(inputs.size() == 1, chk.at(),
                    ": inputs must hold one list of tensors, not ",
                    inputs.size());
  chk.list("inputs[0]", inputs[0], "outputs[0]", out, out.numel());
  at::Tensor flat = flatCat(inputs[0]);
  void *src = flat.data_ptr();
  return launch(OpType::REDUCE_SCATTER, describe(chk.op, "outputs[0]", out),
                outputs, {out, flat}, {[=](nexar_req_t **r) {
                  return nexar_ireduce_scatter_block(comm_, src, b.ptr, b.count,
                                                     b.dtype, op, r);
                }});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNexar::_reduce_scatter_base(
    at::Tensor &output, at::Tensor &input,
    const c10d::ReduceScatterOptions &opts) {
  CHECKER("_reduce_scatter_base");
  chk.tensor("output", output);
  chk.like("input", input, "output", output, size_ * output.numel());
  nexar_op_t op = reduceOp(rank_, chk.op, opts.reduceOp);
  Buf b = chk.reduceBuf("output", output);
  void *src = input.data_ptr();
  return launch(OpType::_REDUCE_SCATTER_BASE,
                describe(chk.op, "output", output), {output}, {input, output},
                {[=](nexar_req_t **r) {
                  return nexar_ireduce_scatter_block(comm_, src, b.ptr, b.count,
                                                     b.dtype, op, r);
                }});
}

namespace {

// Counts and displacements (in nexar elements) of |t| cut along dim 0 by
// |splits| (empty: equal parts).
void splitCounts(const Checker &chk, const char *name, const at::Tensor &t,
                 const std::vector<int64_t> &splits,
                 std::vector<size_t> &counts, std::vector<size_t> &displs) {
  int64_t rows = t.dim() > 0 ? t.size(0) : 0;
  size_t row = rows > 0 ? static_cast<size_t>(t.numel() / rows) * unitOf(t) : 0;
  std::vector<int64_t> s = splits;
  if (s.empty()) {
    TORCH_CHECK_VALUE(rows % chk.size == 0, chk.at(), ": ", name, " has ", rows,
                      " rows in dim 0, not a multiple of the world size ",
                      chk.size, " (give split sizes)");
    s.assign(chk.size, rows / chk.size);
  }
  TORCH_CHECK_VALUE(s.size() == static_cast<size_t>(chk.size), chk.at(), ": ",
                    name, " split sizes have ", s.size(),
                    " entries, not the world size ", chk.size);
  int64_t sum = 0;
  for (int64_t v : s) {
    TORCH_CHECK_VALUE(v >= 0, chk.at(), ": ", name, " split size ", v,
                      " is negative");
    sum += v;
  }
  TORCH_CHECK_VALUE(sum == rows, chk.at(), ": ", name,
                    " split sizes add up to ", sum, ", but it has ", rows,
                    " rows in dim 0");
  size_t at = 0;
  for (int64_t v : s) {
    counts.push_back(static_cast<size_t>(v) * row);
    displs.push_back(at);
    at += counts.back();
  }
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupNexar::alltoall_base(
    at::Tensor &output, at::Tensor &input, std::vector<int64_t> &outputSplits,
    std::vector<int64_t> &inputSplits, const c10d::AllToAllOptions &) {
  CHECKER("alltoall_base");
  chk.tensor("input", input);
  chk.like("output", output, "input", input, output.numel());
  Buf in = moveBuf(input), out = moveBuf(output);
  std::string what = describe(chk.op, "input", input);
  if (outputSplits.empty() && inputSplits.empty()) {
    TORCH_CHECK_VALUE(input.numel() == output.numel() && in.count % size_ == 0,
                      chk.at(), ": input has ", input.numel(),
                      " elements and output ", output.numel(),
                      "; equal split needs the same number, a multiple of the "
                      "world size ",
                      size_);
    return launch(OpType::ALLTOALL_BASE, what, {output}, {input, output},
                  {[=](nexar_req_t **r) {
                    return nexar_ialltoall(comm_, in.ptr, out.ptr,
                                           in.count / size_, in.dtype, r);
                  }});
  }
  std::vector<size_t> sc, sd, rc, rd;
  splitCounts(chk, "input", input, inputSplits, sc, sd);
  splitCounts(chk, "output", output, outputSplits, rc, rd);
  return launch(OpType::ALLTOALL_BASE, what, {output}, {input, output},
                {[=](nexar_req_t **r) {
                  return nexar_ialltoallv(comm_, in.ptr, sc.data(), sd.data(),
                                          out.ptr, rc.data(), rd.data(),
                                          in.dtype, r);
                }});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNexar::alltoall(
    std::vector<at::Tensor> &outputs, std::vector<at::Tensor> &inputs,
    const c10d::AllToAllOptions &) {
  CHECKER("alltoall");
  TORCH_CHECK_VALUE(inputs.size() == static_cast<size_t>(size_) &&
                        outputs.size() == inputs.size(),
                    chk.at(), ": inputs and outputs hold ", inputs.size(),
                    " and ", outputs.size(), " tensors, not the world size ",
                    size_);
  chk.tensor("inputs[0]", inputs[0]);
  size_t unit = unitOf(inputs[0]);
  std::vector<size_t> sc, sd, rc, rd;
  int64_t in_total = 0, out_total = 0;
  for (int i = 0; i < size_; i++) {
    std::string n = "[" + std::to_string(i) + "]";
    chk.like("inputs" + n, inputs[i], "inputs[0]", inputs[0],
             inputs[i].numel());
    chk.like("outputs" + n, outputs[i], "inputs[0]", inputs[0],
             outputs[i].numel());
    sd.push_back(static_cast<size_t>(in_total) * unit);
    sc.push_back(static_cast<size_t>(inputs[i].numel()) * unit);
    rd.push_back(static_cast<size_t>(out_total) * unit);
    rc.push_back(static_cast<size_t>(outputs[i].numel()) * unit);
    in_total += inputs[i].numel();
    out_total += outputs[i].numel();
  }
  at::Tensor in = flatCat(inputs);
  at::Tensor out = at::empty({out_total}, inputs[0].options());
  Buf b = moveBuf(in);
  void *dst = out.data_ptr();
  return launch(OpType::ALLTOALL, describe(chk.op, "inputs[0]", inputs[0]),
                outputs, {in, out}, {[=](nexar_req_t **r) {
                  return nexar_ialltoallv(comm_, b.ptr, sc.data(), sd.data(),
                                          dst, rc.data(), rd.data(), b.dtype,
                                          r);
                }},
                scatterInto(out, outputs));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNexar::barrier(
    const c10d::BarrierOptions &) {
  return launch(OpType::BARRIER, "barrier", {}, {},
                {[=](nexar_req_t **r) { return nexar_ibarrier(comm_, r); }});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNexar::send(
    std::vector<at::Tensor> &tensors, int dst, int tag) {
  CHECKER("send");
  const at::Tensor &t = chk.single(tensors);
  chk.peer(dst, "destination");
  chk.tag(tag);
  Buf b = moveBuf(t);
  return launch(OpType::SEND, describe(chk.op, "tensors[0]", t), tensors,
                tensors, {[=](nexar_req_t **r) {
                  return nexar_isend(comm_, b.ptr, b.count, b.dtype, dst, tag,
                                     r);
                }});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNexar::recv(
    std::vector<at::Tensor> &tensors, int src, int tag) {
  CHECKER("recv");
  const at::Tensor &t = chk.single(tensors);
  if (src != NEXAR_ANY_SOURCE) chk.peer(src, "source");
  chk.tag(tag);
  Buf b = moveBuf(t);
  return launch(src == NEXAR_ANY_SOURCE ? OpType::RECVANYSOURCE : OpType::RECV,
                describe(chk.op, "tensors[0]", t), tensors, tensors,
                {[=](nexar_req_t **r) {
                  return nexar_irecv(comm_, b.ptr, b.count, b.dtype, src, tag,
                                     r);
                }});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNexar::recvAnysource(
    std::vector<at::Tensor> &tensors, int tag) {
  return recv(tensors, NEXAR_ANY_SOURCE, tag);
}

ProcessGroupNexar::ProcessGroupNexar(
    const c10::intrusive_ptr<c10d::Store> &store, int rank, int size,
    std::chrono::milliseconds timeout)
    : c10d::ProcessGroup(rank, size) {
  ctx_ = rendezvous(*store, rank, size, timeout);
  comm_ = nexar_comm_world(ctx_);
  if (at::hasCUDA()) {
    // CUDA tensors: nexar stages device buffers through pinned host memory
    // with its CUDA adapter (docs/device-adapters.md).
    const nexar_device_ops_t *ops = nullptr;
    cuda_ = nexar_device_adapter_cuda(&ops) == NEXAR_OK &&
            nexar_device_adapter_set(ctx_, ops, nullptr) == NEXAR_OK;
  }
  progress_ = std::thread([this] { progressLoop(); });
  std::lock_guard<std::mutex> g(g_groups_mutex);
  g_groups.insert(this);
}

void ProcessGroupNexar::abortAll() {
  std::lock_guard<std::mutex> g(g_groups_mutex);
  for (ProcessGroupNexar *pg : g_groups) {
    pg->fatal_ = true;
    nexar_abort(pg->ctx_);
  }
}

void ProcessGroupNexar::shutdownAll() {
  std::lock_guard<std::mutex> g(g_groups_mutex);
  for (ProcessGroupNexar *pg : g_groups) pg->stopProgress();
}

// Without the GIL: the progress thread may need it to free the last
// reference to a tensor that has a Python object, and the final barrier
// should not stop the process's other Python threads.
void ProcessGroupNexar::stopProgress() {
  PyThreadState *ts = nullptr;
  if (Py_IsInitialized() && PyGILState_Check()) ts = PyEval_SaveThread();
  {
    std::lock_guard<std::mutex> g(queue_mutex_);
    stop_ = true;
  }
  queue_cv_.notify_one();
  // It returns once it has waited for every outstanding request.
  if (progress_.joinable()) progress_.join();
  if (ts) PyEval_RestoreThread(ts);
}

ProcessGroupNexar::~ProcessGroupNexar() {
  {
    std::lock_guard<std::mutex> g(g_groups_mutex);
    g_groups.erase(this);
  }
  stopProgress();
  PyThreadState *ts = nullptr;
  if (Py_IsInitialized() && PyGILState_Check()) ts = PyEval_SaveThread();
  // Works started after shutdownAll: their requests end before the context.
  for (auto &w : queue_) w->drive(true);
  queue_.clear();
  // nexar_finalize ends with a barrier; after a fatal error the peers may
  // never get there, so abort first (they see this rank leave at once).
  if (fatal_) nexar_abort(ctx_);
  nexar_finalize(ctx_);
  if (ts) PyEval_RestoreThread(ts);
}

c10::intrusive_ptr<c10d::ProcessGroup> ProcessGroupNexar::create(
    const c10::intrusive_ptr<c10d::Store> &store, int rank, int size,
    std::chrono::milliseconds timeout) {
  return c10::make_intrusive<ProcessGroupNexar>(store, rank, size, timeout);
}

}  // namespace nexar_torch
