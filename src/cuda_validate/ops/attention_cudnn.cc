// cuDNN fused flash attention through the cuDNN 9 backend C API (no cudnn-frontend): each of
// forward and backward is an operation graph of matmul / pointwise / reduction / reshape nodes
// in the pattern cuDNN's fused-attention engines recognise, finalised once into an execution
// plan and executed with a variant pack of device pointers (by-value scalars point at host floats).
//
//   forward:  S = Q K^T; S *= scale; causal: S = select(S, row >= col, lowest); M = rowmax(S);
//             E = exp(S - M); Z = rowsum(E); lse = M + log Z; P = E / Z (bf16); O = P V
//   backward: Dsum = rowsum(dO * O); S as above; P = exp(S - lse); dV = P^T dO;
//             dS = scale * P * (dO V^T - Dsum); dK = dS^T Q; dQ = dS K (fp32 accumulator, zeroed
//             before each run, then copied to bf16). With GQA, dK/dV are summed over each group's
//             query heads by a reduction node.
// Not obvious: the backend wants K (and V in the backward) as their transposes [b, h, d, s],
// which here are strided views of the packed QKV rows; Q/K/V/O never get copied.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <cudnn.h>
#include <fmt/format.h>

#include "cuda_validate/device_buffer.h"
#include "cuda_validate/ops/attention.h"
#include "cuda_validate/ops/gemm.h"

namespace ppsim::gpu {
namespace {

using Dims = std::array<std::int64_t, 4>;

// The backend's handle attributes are marked deprecated in recent headers (a device-property
// descriptor may replace them) but remain the portable way across cuDNN 9 minor versions.
constexpr auto kGraphHandleAttr = static_cast<cudnnBackendAttributeName_t>(800);  // OPERATIONGRAPH_HANDLE
constexpr auto kPlanHandleAttr = static_cast<cudnnBackendAttributeName_t>(400);   // EXECUTION_PLAN_HANDLE

void cudnn_ok(cudnnStatus_t st, const std::string& what, int line) {
  if (st != CUDNN_STATUS_SUCCESS) throw_cudnn_error(st, what.c_str(), __FILE__, line);
}

class Desc {
 public:
  Desc(cudnnBackendDescriptorType_t type, std::string name) : name_(std::move(name)) {
    cudnn_ok(cudnnBackendCreateDescriptor(type, &d_), "cudnnBackendCreateDescriptor for " + name_, __LINE__);
  }
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;
  ~Desc() {
    if (d_) cudnnBackendDestroyDescriptor(d_);
  }
  cudnnBackendDescriptor_t get() const { return d_; }
  const std::string& name() const { return name_; }
  void set(cudnnBackendAttributeName_t attr, cudnnBackendAttributeType_t type, std::int64_t count, const void* values) {
    cudnn_ok(cudnnBackendSetAttribute(d_, attr, type, count, values),
             fmt::format("cudnnBackendSetAttribute(attribute {}) on {}", static_cast<int>(attr), name_), __LINE__);
  }
  void set_desc(cudnnBackendAttributeName_t attr, const Desc& other) {
    cudnnBackendDescriptor_t o = other.get();
    set(attr, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &o);
  }
  void finalize() { cudnn_ok(cudnnBackendFinalize(d_), "cudnnBackendFinalize on " + name_, __LINE__); }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
  std::string name_;
};

Dims packed_strides(const Dims& d) { return {d[1] * d[2] * d[3], d[2] * d[3], d[3], 1}; }

// Builds one operation graph and its execution plan; owns every descriptor it made.
class GraphBuilder {
 public:
  explicit GraphBuilder(cudnnHandle_t h) : handle_(h) {}

  const Desc& tensor(const std::string& name, std::int64_t uid, cudnnDataType_t dt, const Dims& dims,
                     const Dims& strides, bool is_virtual, bool by_value = false, bool reorder_f16x16 = false) {
    auto t = std::make_unique<Desc>(CUDNN_BACKEND_TENSOR_DESCRIPTOR, "tensor " + name);
    const std::int64_t align = 16;
    const bool virt = is_virtual;
    t->set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt);
    t->set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims.data());
    t->set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides.data());
    t->set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
    t->set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
    t->set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &virt);
    if (by_value) {
      const bool bv = true;
      t->set(CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &bv);
    }
    if (reorder_f16x16) {
      const cudnnBackendTensorReordering_t r = CUDNN_TENSOR_REORDERING_F16x16;
      t->set(CUDNN_ATTR_TENSOR_REORDERING_MODE, CUDNN_TYPE_TENSOR_REORDERING_MODE, 1, &r);
    }
    t->finalize();
    keep_.push_back(std::move(t));
    return *keep_.back();
  }
  const Desc& virt(const std::string& name, cudnnDataType_t dt, const Dims& dims, const Dims& strides) {
    return tensor(name, next_uid_++, dt, dims, strides, true);
  }
  const Desc& virt(const std::string& name, cudnnDataType_t dt, const Dims& dims) {
    return virt(name, dt, dims, packed_strides(dims));
  }
  const Desc& scalar(const std::string& name, std::int64_t uid) {
    return tensor(name, uid, CUDNN_DATA_FLOAT, {1, 1, 1, 1}, {1, 1, 1, 1}, false, true);
  }

  void pointwise(const std::string& name, cudnnPointwiseMode_t mode, cudnnDataType_t comp, const Desc& x,
                 const Desc* b, const Desc* t, const Desc& y, std::int64_t axis = -1) {
    auto pw = std::make_unique<Desc>(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, "pointwise " + name);
    pw->set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
    pw->set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &comp);
    if (axis >= 0) pw->set(CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis);
    pw->finalize();
    auto op = std::make_unique<Desc>(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, "op " + name);
    op->set_desc(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, *pw);
    op->set_desc(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x);
    if (b) op->set_desc(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *b);
    if (t) op->set_desc(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, *t);
    op->set_desc(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y);
    op->finalize();
    add_op(std::move(pw), std::move(op));
  }
  void matmul(const std::string& name, const Desc& a, const Desc& b, const Desc& c) {
    auto mm = std::make_unique<Desc>(CUDNN_BACKEND_MATMUL_DESCRIPTOR, "matmul " + name);
    const cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    mm->set(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp);
    mm->finalize();
    auto op = std::make_unique<Desc>(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, "op " + name);
    op->set_desc(CUDNN_ATTR_OPERATION_MATMUL_ADESC, a);
    op->set_desc(CUDNN_ATTR_OPERATION_MATMUL_BDESC, b);
    op->set_desc(CUDNN_ATTR_OPERATION_MATMUL_CDESC, c);
    op->set_desc(CUDNN_ATTR_OPERATION_MATMUL_DESC, *mm);
    op->finalize();
    add_op(std::move(mm), std::move(op));
  }
  void reduction(const std::string& name, cudnnReduceTensorOp_t mode, const Desc& x, const Desc& y) {
    auto red = std::make_unique<Desc>(CUDNN_BACKEND_REDUCTION_DESCRIPTOR, "reduction " + name);
    const cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    red->set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &mode);
    red->set(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp);
    red->finalize();
    auto op = std::make_unique<Desc>(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, "op " + name);
    op->set_desc(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x);
    op->set_desc(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y);
    op->set_desc(CUDNN_ATTR_OPERATION_REDUCTION_DESC, *red);
    op->finalize();
    add_op(std::move(red), std::move(op));
  }
  void reshape(const std::string& name, const Desc& x, const Desc& y) {
    auto op = std::make_unique<Desc>(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, "op " + name);
    op->set_desc(CUDNN_ATTR_OPERATION_RESHAPE_XDESC, x);
    op->set_desc(CUDNN_ATTR_OPERATION_RESHAPE_YDESC, y);
    op->finalize();
    add_op(nullptr, std::move(op));
  }

  // Causal mask on scores s (dims sd): select(s, row >= col, lowest).
  const Desc& causal_mask(const std::string& tag, const Desc& s, const Dims& sd, const Desc& neg_inf) {
    const Desc& row = virt(tag + "_row", CUDNN_DATA_INT32, sd);
    const Desc& col = virt(tag + "_col", CUDNN_DATA_INT32, sd);
    const Desc& keep = virt(tag + "_keep", CUDNN_DATA_BOOLEAN, sd);
    const Desc& out = virt(tag + "_masked", CUDNN_DATA_FLOAT, sd);
    pointwise(tag + "_gen_row", CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_INT32, s, nullptr, nullptr, row, 2);
    pointwise(tag + "_gen_col", CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_INT32, s, nullptr, nullptr, col, 3);
    pointwise(tag + "_row_ge_col", CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, row, &col, nullptr, keep);
    pointwise(tag + "_select", CUDNN_POINTWISE_BINARY_SELECT, CUDNN_DATA_FLOAT, s, &neg_inf, &keep, out);
    return out;
  }

  // Finalises the graph and the first execution plan that the heuristics offer and that builds.
  std::unique_ptr<Desc> build_plan(const std::string& what, std::int64_t* workspace_bytes, std::string* engine_note) {
    Desc graph(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, what + " graph");
    graph.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, static_cast<std::int64_t>(ops_.size()),
              ops_.data());
    graph.set(kGraphHandleAttr, CUDNN_TYPE_HANDLE, 1, &handle_);
    graph.finalize();
    std::string tried;
    for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
      Desc heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, what + " heuristics");
      heur.set_desc(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph);
      heur.set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
      if (cudnnBackendFinalize(heur.get()) != CUDNN_STATUS_SUCCESS) continue;
      std::int64_t count = 0;
      if (cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count,
                                   nullptr) != CUDNN_STATUS_SUCCESS || count <= 0)
        continue;
      std::vector<std::unique_ptr<Desc>> cfgs;
      std::vector<cudnnBackendDescriptor_t> raw;
      for (std::int64_t i = 0; i < count; ++i) {
        cfgs.push_back(std::make_unique<Desc>(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, what + " engine config"));
        raw.push_back(cfgs.back()->get());
      }
      std::int64_t returned = 0;
      if (cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count,
                                   &returned, raw.data()) != CUDNN_STATUS_SUCCESS)
        continue;
      for (std::int64_t i = 0; i < returned; ++i) {
        auto plan = std::make_unique<Desc>(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, what + " plan");
        plan->set(kPlanHandleAttr, CUDNN_TYPE_HANDLE, 1, &handle_);
        plan->set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &raw[i]);
        const cudnnStatus_t st = cudnnBackendFinalize(plan->get());
        if (st != CUDNN_STATUS_SUCCESS) {
          char msg[256] = {0};
          cudnnGetLastErrorString(msg, sizeof(msg));
          tried += fmt::format(" [mode {} config {}: {} {}]", static_cast<int>(mode), i, cudnnGetErrorString(st), msg);
          continue;
        }
        std::int64_t ws = 0, got = 0;
        cudnn_ok(cudnnBackendGetAttribute(plan->get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1,
                                          &got, &ws),
                 "get the workspace size of the " + what + " plan", __LINE__);
        *workspace_bytes = ws;
        if (engine_note) *engine_note = fmt::format("heuristic mode {} config {} of {}", static_cast<int>(mode), i, returned);
        return plan;
      }
    }
    throw_gpu_failure(fmt::format("cuDNN {} found no engine for the {} graph{}", cudnnGetVersion(), what,
                                  tried.empty() ? std::string(" (the heuristics returned none)") : ":" + tried),
                      "cuDNN >= 9 with a Hopper or newer GPU supports this pattern; CUDNN_LOGERR_DBG=1 "
                      "CUDNN_LOGDEST_DBG=stderr prints why; PPSIM_ATTENTION=reference uses the cuBLAS + softmax path");
  }

 private:
  void add_op(std::unique_ptr<Desc> attr, std::unique_ptr<Desc> op) {
    ops_.push_back(op->get());
    if (attr) keep_.push_back(std::move(attr));
    keep_.push_back(std::move(op));
  }

  cudnnHandle_t handle_;
  std::vector<std::unique_ptr<Desc>> keep_;
  std::vector<cudnnBackendDescriptor_t> ops_;
  std::int64_t next_uid_ = 1000;
};

// Unique ids of the non-virtual tensors.
enum Uid : std::int64_t {
  kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV, kScale, kNegInf, kOne, kDQAccum
};

class CudnnAttention final : public Attention {
 public:
  explicit CudnnAttention(const AttentionShape& sh) : sh_(sh) {
    PPSIM_CUDNN_CHECK(cudnnCreate(&handle_));
    try {
      build_forward();
      build_backward();
    } catch (...) {
      fwd_plan_.reset();
      bwd_plan_.reset();
      fwd_graph_.reset();
      bwd_graph_.reset();
      cudnnDestroy(handle_);
      throw;
    }
    scale_ = sh.scale();
    fwd_ws_.resize(static_cast<std::size_t>(std::max<std::int64_t>(fwd_ws_bytes_, 1)));
    bwd_ws_.resize(static_cast<std::size_t>(std::max<std::int64_t>(bwd_ws_bytes_, 1)));
    dq_accum_.resize(static_cast<std::size_t>(sh.tokens() * sh.heads * sh.head_dim));
  }
  ~CudnnAttention() override {
    fwd_plan_.reset();
    bwd_plan_.reset();
    fwd_graph_.reset();
    bwd_graph_.reset();
    if (handle_) cudnnDestroy(handle_);
  }
  const char* name() const override { return "cudnn"; }

  void forward(bf16* o, float* lse, const bf16* qkv, cudaStream_t s) override {
    const std::int64_t d = sh_.head_dim;
    std::vector<std::int64_t> uids = {kQ, kK, kV, kO, kStats, kScale, kNegInf};
    std::vector<void*> ptrs = {const_cast<bf16*>(qkv), const_cast<bf16*>(qkv) + sh_.heads * d,
                               const_cast<bf16*>(qkv) + (sh_.heads + sh_.kv_heads) * d, o, lse, &scale_, &neg_inf_};
    execute(*fwd_plan_, uids, ptrs, fwd_ws_.get(), s, "forward");
  }

  void backward(bf16* dqkv, const bf16* dout, const bf16* qkv, const bf16* o, const float* lse,
                cudaStream_t s) override {
    const std::int64_t d = sh_.head_dim;
    auto* q = const_cast<bf16*>(qkv);
    PPSIM_CUDA_CHECK(cudaMemsetAsync(dq_accum_.get(), 0, dq_accum_.bytes(), s));
    std::vector<std::int64_t> uids = {kQ, kK, kV, kO, kDO, kStats, kDQ, kDK, kDV, kScale, kNegInf, kOne, kDQAccum};
    std::vector<void*> ptrs = {q,
                               q + sh_.heads * d,
                               q + (sh_.heads + sh_.kv_heads) * d,
                               const_cast<bf16*>(o),
                               const_cast<bf16*>(dout),
                               const_cast<float*>(lse),
                               dqkv,
                               dqkv + sh_.heads * d,
                               dqkv + (sh_.heads + sh_.kv_heads) * d,
                               &scale_,
                               &neg_inf_,
                               &one_,
                               dq_accum_.get()};
    execute(*bwd_plan_, uids, ptrs, bwd_ws_.get(), s, "backward");
  }

 private:
  void execute(const Desc& plan, const std::vector<std::int64_t>& uids, std::vector<void*>& ptrs, void* ws,
               cudaStream_t s, const char* what) {
    PPSIM_CUDNN_CHECK(cudnnSetStream(handle_, s));
    Desc pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, std::string("variant pack ") + what);
    pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, static_cast<std::int64_t>(uids.size()), uids.data());
    pack.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, static_cast<std::int64_t>(ptrs.size()),
             ptrs.data());
    pack.set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws);
    pack.finalize();
    cudnn_ok(cudnnBackendExecute(handle_, plan.get(), pack.get()), std::string("cudnnBackendExecute (attention ") + what + ")",
             __LINE__);
  }

  // Strided views into the packed token-major buffers.
  Dims qkv_view_strides(bool transposed) const {
    const std::int64_t w = sh_.qkv_width(), d = sh_.head_dim, s = sh_.seq;
    return transposed ? Dims{s * w, d, 1, w} : Dims{s * w, d, w, 1};
  }
  Dims o_strides() const {
    const std::int64_t hd = static_cast<std::int64_t>(sh_.heads) * sh_.head_dim;
    return {sh_.seq * hd, sh_.head_dim, hd, 1};
  }

  void build_forward() {
    const std::int64_t b = sh_.batch, h = sh_.heads, hk = sh_.kv_heads, s = sh_.seq, d = sh_.head_dim;
    fwd_graph_ = std::make_unique<GraphBuilder>(handle_);
    GraphBuilder& g = *fwd_graph_;
    const Dims sd{b, h, s, s}, rowd{b, h, s, 1};
    const Desc& q = g.tensor("Q", kQ, CUDNN_DATA_BFLOAT16, {b, h, s, d}, qkv_view_strides(false), false);
    const Desc& kt = g.tensor("K^T", kK, CUDNN_DATA_BFLOAT16, {b, hk, d, s}, qkv_view_strides(true), false);
    const Desc& v = g.tensor("V", kV, CUDNN_DATA_BFLOAT16, {b, hk, s, d}, qkv_view_strides(false), false);
    const Desc& o = g.tensor("O", kO, CUDNN_DATA_BFLOAT16, {b, h, s, d}, o_strides(), false);
    const Desc& stats = g.tensor("Stats", kStats, CUDNN_DATA_FLOAT, rowd, {h * s, s, 1, 1}, false);
    const Desc& scale = g.scalar("attn_scale", kScale);
    const Desc& neg_inf = g.scalar("neg_inf", kNegInf);

    const Desc& s1 = g.virt("bmm1", CUDNN_DATA_FLOAT, sd);
    g.matmul("bmm1", q, kt, s1);
    const Desc& s2 = g.virt("scaled", CUDNN_DATA_FLOAT, sd);
    g.pointwise("attn_scale", CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, s1, &scale, nullptr, s2);
    const Desc& s3 = g.causal_mask("causal", s2, sd, neg_inf);
    const Desc& mx = g.virt("max", CUDNN_DATA_FLOAT, rowd);
    g.reduction("max", CUDNN_REDUCE_TENSOR_MAX, s3, mx);
    const Desc& sub = g.virt("sub", CUDNN_DATA_FLOAT, sd);
    g.pointwise("sub", CUDNN_POINTWISE_SUB, CUDNN_DATA_FLOAT, s3, &mx, nullptr, sub);
    const Desc& ex = g.virt("exp", CUDNN_DATA_FLOAT, sd);
    g.pointwise("exp", CUDNN_POINTWISE_EXP, CUDNN_DATA_FLOAT, sub, nullptr, nullptr, ex);
    const Desc& sum = g.virt("sum", CUDNN_DATA_FLOAT, rowd);
    g.reduction("sum", CUDNN_REDUCE_TENSOR_ADD, ex, sum);
    const Desc& lg = g.virt("log", CUDNN_DATA_FLOAT, rowd);
    g.pointwise("log", CUDNN_POINTWISE_LOG, CUDNN_DATA_FLOAT, sum, nullptr, nullptr, lg);
    g.pointwise("stats", CUDNN_POINTWISE_ADD, CUDNN_DATA_FLOAT, mx, &lg, nullptr, stats);
    const Desc& p = g.virt("P", CUDNN_DATA_BFLOAT16, sd);
    g.pointwise("div", CUDNN_POINTWISE_DIV, CUDNN_DATA_FLOAT, ex, &sum, nullptr, p);
    g.matmul("bmm2", p, v, o);
    fwd_plan_ = g.build_plan("attention forward", &fwd_ws_bytes_, &fwd_engine_);
  }

  void build_backward() {
    const std::int64_t b = sh_.batch, h = sh_.heads, hk = sh_.kv_heads, s = sh_.seq, d = sh_.head_dim;
    bwd_graph_ = std::make_unique<GraphBuilder>(handle_);
    GraphBuilder& g = *bwd_graph_;
    const Dims sd{b, h, s, s}, rowd{b, h, s, 1}, td{b, h, s, s};
    const Dims transposed_scores{h * s * s, s * s, 1, s};
    const Desc& q = g.tensor("Q", kQ, CUDNN_DATA_BFLOAT16, {b, h, s, d}, qkv_view_strides(false), false);
    const Desc& kt = g.tensor("K^T", kK, CUDNN_DATA_BFLOAT16, {b, hk, d, s}, qkv_view_strides(true), false);
    const Desc& vt = g.tensor("V^T", kV, CUDNN_DATA_BFLOAT16, {b, hk, d, s}, qkv_view_strides(true), false);
    const Desc& o = g.tensor("O", kO, CUDNN_DATA_BFLOAT16, {b, h, s, d}, o_strides(), false);
    const Desc& dout = g.tensor("dO", kDO, CUDNN_DATA_BFLOAT16, {b, h, s, d}, o_strides(), false);
    const Desc& stats = g.tensor("Stats", kStats, CUDNN_DATA_FLOAT, rowd, {h * s, s, 1, 1}, false);
    const Desc& dq = g.tensor("dQ", kDQ, CUDNN_DATA_BFLOAT16, {b, h, s, d}, qkv_view_strides(false), false);
    const Desc& dk = g.tensor("dK", kDK, CUDNN_DATA_BFLOAT16, {b, hk, s, d}, qkv_view_strides(false), false);
    const Desc& dv = g.tensor("dV", kDV, CUDNN_DATA_BFLOAT16, {b, hk, s, d}, qkv_view_strides(false), false);
    const Desc& scale = g.scalar("attn_scale", kScale);
    const Desc& neg_inf = g.scalar("neg_inf", kNegInf);
    const Desc& one = g.scalar("one", kOne);
    const Desc& dq_accum = g.tensor("dQ_accum", kDQAccum, CUDNN_DATA_FLOAT, {b, h, s, d}, packed_strides({b, h, s, d}),
                                    false, false, true);

    // Dsum = rowsum(dO * O)
    const Desc& dodot = g.virt("dO*O", CUDNN_DATA_FLOAT, {b, h, s, d}, {h * s * d, s * d, h * d, 1});
    g.pointwise("mul_dO_O", CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, dout, &o, nullptr, dodot);
    const Desc& dsum0 = g.virt("rowsum(dO*O)", CUDNN_DATA_FLOAT, rowd, {h * s, s, 1, 1});
    g.reduction("reduce_dO_O", CUDNN_REDUCE_TENSOR_ADD, dodot, dsum0);
    const Desc& dsum = g.virt("softmax_sum", CUDNN_DATA_FLOAT, rowd, {h * s, s, 1, 1});
    g.pointwise("scale_dropout_inv", CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, dsum0, &one, nullptr, dsum);

    // P = exp(scale * Q K^T (masked) - lse)
    const Desc& s1 = g.virt("Q.K^T", CUDNN_DATA_FLOAT, sd);
    g.matmul("matmul_Q_KT", q, kt, s1);
    const Desc& s2 = g.virt("scaled", CUDNN_DATA_FLOAT, sd);
    g.pointwise("mul_s_attn_scale", CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, s1, &scale, nullptr, s2);
    const Desc& s3 = g.causal_mask("causal", s2, sd, neg_inf);
    const Desc& s4 = g.virt("s-lse", CUDNN_DATA_FLOAT, sd);
    g.pointwise("sub_s_m", CUDNN_POINTWISE_SUB, CUDNN_DATA_FLOAT, s3, &stats, nullptr, s4);
    const Desc& p = g.virt("P", CUDNN_DATA_FLOAT, sd);
    g.pointwise("exp_s", CUDNN_POINTWISE_EXP, CUDNN_DATA_FLOAT, s4, nullptr, nullptr, p);

    // dV = P^T dO (summed over the group's query heads for GQA)
    const Desc& pt = g.virt("P^T", CUDNN_DATA_BFLOAT16, td, transposed_scores);
    g.reshape("reshape_p", p, pt);
    if (h == hk) {
      g.matmul("matmul_pT_dO", pt, dout, dv);
    } else {
      const Desc& dvh = g.virt("dV per query head", CUDNN_DATA_BFLOAT16, {b, h, s, d});
      g.matmul("matmul_pT_dO", pt, dout, dvh);
      g.reduction("red_dV_head", CUDNN_REDUCE_TENSOR_ADD, dvh, dv);
    }

    // dS = scale * P * (dO V^T - Dsum)
    const Desc& dp = g.virt("dO.V^T", CUDNN_DATA_FLOAT, sd);
    g.matmul("matmul_dO_VT", dout, vt, dp);
    const Desc& dp2 = g.virt("dP*1", CUDNN_DATA_FLOAT, sd);
    g.pointwise("dP_dropout_mask", CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, dp, &one, nullptr, dp2);
    const Desc& dp3 = g.virt("dP-Dsum", CUDNN_DATA_FLOAT, sd);
    g.pointwise("sub_dP_softmax_sum", CUDNN_POINTWISE_SUB, CUDNN_DATA_FLOAT, dp2, &dsum, nullptr, dp3);
    const Desc& ds0 = g.virt("P*(dP-Dsum)", CUDNN_DATA_FLOAT, sd);
    g.pointwise("mul_dP_exp_s", CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, dp3, &p, nullptr, ds0);
    const Desc& ds = g.virt("dS", CUDNN_DATA_FLOAT, sd);
    g.pointwise("mul_dS_attn_scale", CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, ds0, &scale, nullptr, ds);

    // dK = dS^T Q
    const Desc& dst = g.virt("dS^T", CUDNN_DATA_BFLOAT16, td, transposed_scores);
    g.reshape("reshape_dS", ds, dst);
    if (h == hk) {
      g.matmul("matmul_dST_Q", dst, q, dk);
    } else {
      const Desc& dkh = g.virt("dK per query head", CUDNN_DATA_BFLOAT16, {b, h, s, d});
      g.matmul("matmul_dST_Q", dst, q, dkh);
      g.reduction("red_dK_head", CUDNN_REDUCE_TENSOR_ADD, dkh, dk);
    }

    // dQ = dS K, accumulated in fp32, then converted
    const Desc& k = g.virt("K", CUDNN_DATA_FLOAT, {b, hk, s, d}, qkv_view_strides(false));
    g.reshape("reshape_k", kt, k);
    g.matmul("matmul_dS_K", ds, k, dq_accum);
    g.pointwise("identity_dQ", CUDNN_POINTWISE_IDENTITY, CUDNN_DATA_FLOAT, dq_accum, nullptr, nullptr, dq);
    bwd_plan_ = g.build_plan("attention backward", &bwd_ws_bytes_, &bwd_engine_);
  }

  AttentionShape sh_;
  cudnnHandle_t handle_ = nullptr;
  std::unique_ptr<GraphBuilder> fwd_graph_, bwd_graph_;
  std::unique_ptr<Desc> fwd_plan_, bwd_plan_;
  std::int64_t fwd_ws_bytes_ = 0, bwd_ws_bytes_ = 0;
  std::string fwd_engine_, bwd_engine_;
  DeviceBuffer<char> fwd_ws_, bwd_ws_;
  DeviceBuffer<float> dq_accum_;
  float scale_ = 1.f;
  float neg_inf_ = std::numeric_limits<float>::lowest();
  float one_ = 1.f;
};

}  // namespace

std::unique_ptr<Attention> make_cudnn_attention(const AttentionShape& shape) {
  return std::make_unique<CudnnAttention>(shape);
}

std::unique_ptr<Attention> make_attention(const AttentionShape& shape, Gemm& gemm, std::string* note) {
  const char* env = std::getenv("PPSIM_ATTENTION");
  const std::string choice = env ? env : "";
  if (choice == "reference") {
    if (note) *note = "PPSIM_ATTENTION=reference";
    return make_reference_attention(shape, gemm);
  }
  try {
    return make_cudnn_attention(shape);
  } catch (const std::exception& e) {
    if (choice == "cudnn") throw;  // asked for cuDNN explicitly: no silent fallback
    std::string why = e.what();
    if (auto nl = why.find('\n'); nl != std::string::npos) why = why.substr(0, nl);
    if (note) *note = why;
    std::fprintf(stderr, "ppsim: cuDNN fused attention unavailable, using the cuBLAS + softmax reference: %s\n",
                 why.c_str());
    return make_reference_attention(shape, gemm);
  }
}

}  // namespace ppsim::gpu
