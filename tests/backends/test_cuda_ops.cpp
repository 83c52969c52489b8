// Every CUDA kernel against the scalar references (src/ops/) or the CPU backend, on random data of
// odd sizes. Thresholds, stated per test: |gpu - ref| <= abs + rel * |ref| element-wise.
// Without a GPU (CI) every test reports itself skipped with the reason.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <tuple>

#include "backend_test_util.h"
#include "kv/kv_cache.h"
#include "ops/ops_ref.h"
#include "ops/quant.h"

namespace cactus {
namespace {

using testing::hold;
using testing::hold_f32;
using testing::random_floats;
using testing::worst_error;

const DType kWeightTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0, DType::Q4_1, DType::Q5_0,
                              DType::Q5_1, DType::Q8_0, DType::Q4_K, DType::Q5_K, DType::Q6_K};

// Rows of random weights quantized to `type` (bytes) and their dequantized values (the reference).
void quantized_rows(DType type, size_t width, size_t rows, uint32_t seed, std::vector<uint8_t>* bytes,
                    std::vector<float>* values) {
    const std::vector<float> src = random_floats(width * rows, seed);
    const size_t rb = dtype_row_bytes(type, width);
    bytes->assign(rb * rows, 0);
    values->assign(width * rows, 0.0f);
    for (size_t r = 0; r < rows; ++r) {
        quantize_row_ref(type, bytes->data() + r * rb, src.data() + r * width, width);
        dequantize_row_ref(type, values->data() + r * width, bytes->data() + r * rb, width);
    }
}

size_t width_for(DType type, size_t plain_width) {
    const size_t block = dtype_traits(type).block_size;
    return block == 1 ? plain_width : (block == 32 ? 32 * 13 : 256 * 3);
}

TEST(CudaOps, MatmulEveryWeightTypeAgainstTheCpuDotReference) {
    CACTUS_REQUIRE_CUDA(be);
    // Reference: the CPU's definition, vec_dot_ref over activations quantized to vec_dot_type
    // (Q8_0 / Q8_1 / Q8_K; f32 for float weights). Threshold: 2e-5 of sum |w x| + 1e-5 (the same
    // rounded inputs; only the float summation order differs).
    for (DType type : kWeightTypes) {
        ASSERT_TRUE(be->supports_weight(type)) << dtype_name(type);
        const size_t n_in = width_for(type, 77);
        const size_t n_out = 67;
        std::vector<uint8_t> wq;
        std::vector<float> wf;
        quantized_rows(type, n_in, n_out, 11 + static_cast<uint32_t>(type), &wq, &wf);
        const size_t rb = dtype_row_bytes(type, n_in);
        const DType dot_type = vec_dot_type(type);
        const testing::Held w = hold(*be, type, n_in, n_out, wq.data());
        for (size_t n : {size_t(1), size_t(5), size_t(13)}) {
            const std::vector<float> x = random_floats(n * n_in, 7 + static_cast<uint32_t>(n), -2.0f, 2.0f);
            const testing::Held xd = hold_f32(*be, x, n_in);
            const testing::Held yd = hold(*be, DType::F32, n_out, n);
            be->matmul(yd.t, w.t, xd.t);
            const std::vector<float> y = download_f32(*be, yd.t);
            std::vector<uint8_t> xq(dtype_row_bytes(dot_type, n_in));
            for (size_t t = 0; t < n; ++t) {
                quantize_row_ref(dot_type, xq.data(), &x[t * n_in], n_in);
                for (size_t o = 0; o < n_out; ++o) {
                    const float ref = vec_dot_ref(type, wq.data() + o * rb, xq.data(), n_in);
                    double mag = 0.0;
                    for (size_t i = 0; i < n_in; ++i) mag += std::fabs(wf[o * n_in + i] * x[t * n_in + i]);
                    ASSERT_NEAR(y[t * n_out + o], ref, 2e-5 * mag + 1e-5)
                        << dtype_name(type) << " n=" << n << " t=" << t << " row " << o;
                }
            }
        }
    }
}

TEST(CudaOps, GetRowsEveryTypeWithScale) {
    CACTUS_REQUIRE_CUDA(be);
    // Threshold: 1e-6 relative (dequantization is exact in f32; the scale is one rounding).
    for (DType type : kWeightTypes) {
        const size_t width = width_for(type, 45);
        std::vector<uint8_t> tq;
        std::vector<float> tf;
        quantized_rows(type, width, 19, 3 + static_cast<uint32_t>(type), &tq, &tf);
        const testing::Held table = hold(*be, type, width, 19, tq.data());
        const std::vector<int32_t> ids = {4, 0, 18, 4, 7};
        const testing::Held idd = hold(*be, DType::I32, 1, ids.size(), ids.data());
        const testing::Held yd = hold(*be, DType::F32, width, ids.size());
        be->get_rows(yd.t, table.t, idd.t, 1.5f);
        const std::vector<float> y = download_f32(*be, yd.t);
        std::vector<float> ref;
        for (int32_t id : ids) {
            for (size_t i = 0; i < width; ++i) ref.push_back(tf[id * width + i] * 1.5f);
        }
        EXPECT_LE(worst_error(y, ref, 1e-7, 1e-6), 1.0) << dtype_name(type);
    }
}

TEST(CudaOps, GetRowsRejectsAnIdOutsideTheTable) {
    CACTUS_REQUIRE_CUDA(be);
    const std::vector<float> tf = random_floats(3 * 8, 1);
    const testing::Held table = hold_f32(*be, tf, 8);
    const std::vector<int32_t> ids = {1, 3};
    const testing::Held idd = hold(*be, DType::I32, 1, 2, ids.data());
    const testing::Held yd = hold(*be, DType::F32, 8, 2);
    be->get_rows(yd.t, table.t, idd.t, 1.0f);
    EXPECT_THROW(be->synchronize(std::chrono::milliseconds(5000)), Error);
    be->synchronize(std::chrono::milliseconds(5000));  // reported once; the handle stays usable
}

TEST(CudaOps, NormsAndElementwise) {
    CACTUS_REQUIRE_CUDA(be);
    const size_t n = 7, w = 301;
    const std::vector<float> x = random_floats(n * w, 21, -3.0f, 3.0f);
    const std::vector<float> g = random_floats(w, 22);
    const std::vector<float> bias = random_floats(w, 23);
    const std::vector<float> u = random_floats(n * w, 24, -2.0f, 2.0f);
    const testing::Held xd = hold_f32(*be, x, w), gd = hold_f32(*be, g, w), bd = hold_f32(*be, bias, w),
                        ud = hold_f32(*be, u, w), yd = hold(*be, DType::F32, w, n);
    std::vector<float> ref(n * w);
    // rms_norm / layer_norm: 1e-5 relative + 1e-6 absolute.
    be->rms_norm(yd.t, xd.t, gd.t, 1e-6f);
    for (size_t r = 0; r < n; ++r) rms_norm_ref(&ref[r * w], &x[r * w], g.data(), w, 1e-6f);
    EXPECT_LE(worst_error(download_f32(*be, yd.t), ref, 1e-6, 1e-5), 1.0) << "rms_norm";
    be->layer_norm(yd.t, xd.t, gd.t, bd.t, 1e-5f);
    for (size_t r = 0; r < n; ++r) layer_norm_ref(&ref[r * w], &x[r * w], g.data(), bias.data(), w, 1e-5f);
    EXPECT_LE(worst_error(download_f32(*be, yd.t), ref, 1e-5, 1e-5), 1.0) << "layer_norm";
    // add (full and broadcast), scale, softcap: 1e-6 relative.
    be->add(yd.t, xd.t, ud.t);
    for (size_t i = 0; i < n * w; ++i) ref[i] = x[i] + u[i];
    EXPECT_LE(worst_error(download_f32(*be, yd.t), ref, 1e-7, 1e-6), 1.0) << "add";
    be->add(yd.t, xd.t, bd.t);
    for (size_t i = 0; i < n * w; ++i) ref[i] = x[i] + bias[i % w];
    EXPECT_LE(worst_error(download_f32(*be, yd.t), ref, 1e-7, 1e-6), 1.0) << "add broadcast";
    be->scale(yd.t, xd.t, -0.37f);
    for (size_t i = 0; i < n * w; ++i) ref[i] = x[i] * -0.37f;
    EXPECT_LE(worst_error(download_f32(*be, yd.t), ref, 1e-7, 1e-6), 1.0) << "scale";
    be->softcap(yd.t, xd.t, 2.5f);
    for (size_t i = 0; i < n * w; ++i) ref[i] = 2.5f * std::tanh(x[i] / 2.5f);
    EXPECT_LE(worst_error(download_f32(*be, yd.t), ref, 1e-6, 1e-5), 1.0) << "softcap";
    // gelu / glu: 1e-5 relative + 1e-6 absolute.
    be->gelu(yd.t, xd.t, Activation::GELU_TANH);
    for (size_t i = 0; i < n * w; ++i) ref[i] = gelu_tanh_ref(x[i]);
    EXPECT_LE(worst_error(download_f32(*be, yd.t), ref, 1e-6, 1e-5), 1.0) << "gelu tanh";
    be->gelu(yd.t, xd.t, Activation::GELU_ERF);
    for (size_t i = 0; i < n * w; ++i) ref[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] / std::sqrt(2.0f)));
    EXPECT_LE(worst_error(download_f32(*be, yd.t), ref, 1e-6, 1e-5), 1.0) << "gelu erf";
    be->glu(yd.t, xd.t, ud.t, Activation::SILU);
    swiglu_ref(ref.data(), x.data(), u.data(), n * w);
    EXPECT_LE(worst_error(download_f32(*be, yd.t), ref, 1e-6, 1e-5), 1.0) << "swiglu";
    be->glu(yd.t, xd.t, ud.t, Activation::GELU_TANH);
    geglu_ref(ref.data(), x.data(), u.data(), n * w);
    EXPECT_LE(worst_error(download_f32(*be, yd.t), ref, 1e-6, 1e-5), 1.0) << "geglu";
}

TEST(CudaOps, RopeBothStylesPartialRotation) {
    CACTUS_REQUIRE_CUDA(be);
    // Threshold: 1e-5 relative + 1e-5 absolute (angles in double as the reference computes them).
    const size_t n = 9, n_head = 3, head_dim = 40;
    for (RopeStyle style : {RopeStyle::NORMAL, RopeStyle::NEOX}) {
        for (size_t n_rot : {size_t(40), size_t(24)}) {
            const RopeParams p{style, n_rot, 10000.0f, 0.5f};
            std::vector<float> x = random_floats(n * n_head * head_dim, 31);
            const std::vector<int32_t> pos = {0, 1, 2, 17, 300, 4095, 5, 6, 9000};
            const testing::Held xd = hold_f32(*be, x, n_head * head_dim);
            const testing::Held pd = hold(*be, DType::I32, 1, n, pos.data());
            be->rope(xd.t, n_head, pd.t, p);
            for (size_t t = 0; t < n; ++t) rope_ref(&x[t * n_head * head_dim], n_head, head_dim, pos[t], p);
            EXPECT_LE(worst_error(download_f32(*be, xd.t), x, 1e-5, 1e-5), 1.0)
                << (style == RopeStyle::NEOX ? "neox" : "normal") << " n_rot " << n_rot;
        }
    }
}

// The same appends and attention steps over a CPU cache and a CUDA cache: outputs must agree.
// bidirectional: every chunk is one span whose queries all see the whole chunk (KvBatch::last, as
// a Gemma 3 image), causal before it. Head dims dk (keys) and dv (values).
void compare_kv_attention(KvType type, uint32_t window, uint32_t sinks, bool bidirectional = false, size_t dk = 40,
                          size_t dv = 72) {
    CACTUS_REQUIRE_CUDA(gpu);
    std::unique_ptr<Backend> cpu = make_backend(BackendOptions{});
    const size_t n_head = 6, n_head_kv = 2;
    KvLayerSpec global;
    global.k_width = n_head_kv * dk;
    global.v_width = n_head_kv * dv;
    global.n_head_kv = n_head_kv;
    KvLayerSpec ring = global;
    ring.window = window;
    ring.sinks = sinks;
    KvCacheConfig config;
    config.n_ctx = 96;
    config.max_chunk = 13;
    config.kv.type = type;
    const std::vector<KvLayerSpec> layers = {global, ring};
    auto make = [&](Backend& be) {
        return std::make_unique<KvCache>(
            layers, config, [&be](const std::vector<KvLayerLayout>& l, KvType t) { return be.make_kv_storage(l, t); });
    };
    std::unique_ptr<KvCache> kc = make(*cpu), kg = make(*gpu);
    uint32_t seed = 100;
    // Chunks of odd sizes: prefill, then decode steps, past the ring's capacity.
    for (size_t wanted : {size_t(13), size_t(1), size_t(7), size_t(1), size_t(13), size_t(1), size_t(11), size_t(1)}) {
        const size_t chunk = kc->reserve(wanted);  // a ring takes at most its window at once
        ASSERT_EQ(kg->reserve(wanted), chunk);
        const size_t first = kc->append(chunk);
        ASSERT_EQ(kg->append(chunk), first);
        std::vector<KvCache*> cc(chunk, kc.get()), cg(chunk, kg.get());
        std::vector<size_t> tokens(chunk), last(chunk, first + chunk - 1);
        for (size_t i = 0; i < chunk; ++i) tokens[i] = first + i;
        const size_t* span_end = bidirectional ? last.data() : nullptr;
        const KvBatch bc{chunk, cc.data(), tokens.data(), span_end}, bg{chunk, cg.data(), tokens.data(), span_end};
        for (size_t il = 0; il < 2; ++il) {
            const std::vector<float> k = random_floats(chunk * global.k_width, ++seed, -2.0f, 2.0f);
            const std::vector<float> v = random_floats(chunk * global.v_width, ++seed);
            const std::vector<float> q = random_floats(chunk * n_head * dk, ++seed);
            const testing::Held kcd = hold_f32(*cpu, k, global.k_width), vcd = hold_f32(*cpu, v, global.v_width),
                                qcd = hold_f32(*cpu, q, n_head * dk), ocd = hold(*cpu, DType::F32, n_head * dv, chunk);
            const testing::Held kgd = hold_f32(*gpu, k, global.k_width), vgd = hold_f32(*gpu, v, global.v_width),
                                qgd = hold_f32(*gpu, q, n_head * dk), ogd = hold(*gpu, DType::F32, n_head * dv, chunk);
            cpu->kv_store(il, bc, kcd.t, vcd.t);
            gpu->kv_store(il, bg, kgd.t, vgd.t);
            cpu->attention_kv(ocd.t, il, bc, qcd.t, n_head, 0.15f);
            gpu->attention_kv(ogd.t, il, bg, qgd.t, n_head, 0.15f);
            // Threshold: 2e-4 absolute + 1e-3 relative (same stored rows; f32 sums in another order, the
            // weights rounded to f16 at slightly different values with f16 rows); f32 rows round
            // nothing: 2e-5 + 1e-4.
            const bool f32 = type == KvType::F32;
            EXPECT_LE(
                worst_error(download_f32(*gpu, ogd.t), download_f32(*cpu, ocd.t), f32 ? 2e-5 : 2e-4, f32 ? 1e-4 : 1e-3),
                1.0)
                << "layer " << il << " tokens from " << first;
        }
    }
    // Row operations of compaction: read / write / move heads agree with the host storage.
    std::vector<float> a(std::max(dk, dv)), b(std::max(dk, dv));
    kg->storage().move_head(1, 3, 5, 1);
    kc->storage().move_head(1, 3, 5, 1);
    const std::vector<float> head = random_floats(dk, 9);
    kg->storage().write_head(0, 2, 0, true, head.data());
    kc->storage().write_head(0, 2, 0, true, head.data());
    for (auto [il, row, h, key] : {std::tuple<size_t, size_t, size_t, bool>{1, 3, 1, false},
                                   {1, 3, 1, true},
                                   {0, 2, 0, true},
                                   {0, 7, 1, false}}) {
        kg->storage().read_head(il, row, h, key, a.data());
        kc->storage().read_head(il, row, h, key, b.data());
        const size_t dim = key ? dk : dv;
        EXPECT_EQ(std::memcmp(a.data(), b.data(), dim * sizeof(float)), 0) << "head " << il << "/" << row << "/" << h;
    }
}

TEST(CudaOps, AttentionOverCacheF16GlobalAndRingWithSinks) { compare_kv_attention(KvType::F16, 9, 2); }
TEST(CudaOps, AttentionOverCacheInt8GlobalAndRing) { compare_kv_attention(KvType::I8, 16, 0); }
// kv_cache_type f32: rows stored as given (read_head equals the CPU's bit for bit), nothing rounded.
TEST(CudaOps, AttentionOverCacheF32GlobalAndRingWithSinks) { compare_kv_attention(KvType::F32, 9, 2); }
// Gemma 4's global layers: head_dim 512 (the kernel's limit), in every precision.
TEST(CudaOps, AttentionOverCacheHeadDim512EveryPrecision) {
    for (KvType type : {KvType::F16, KvType::I8, KvType::F32}) {
        SCOPED_TRACE(kv_type_name(type));
        compare_kv_attention(type, 9, 2, false, 512, 512);
    }
}
// The CUDA kernel's `ahead` field (bidirectional spans) against the CPU backend.
TEST(CudaOps, AttentionOverCacheBidirectionalSpans) { compare_kv_attention(KvType::F16, 9, 2, true); }

TEST(CudaOps, DenseAttentionAndConvolutionsMatchCpu) {
    CACTUS_REQUIRE_CUDA(gpu);
    std::unique_ptr<Backend> cpu = make_backend(BackendOptions{});
    DenseAttention s;
    s.n_head = 4;
    s.n_head_kv = 2;
    s.head_dim = 24;
    s.head_dim_v = 40;
    s.scale = 0.2f;
    const size_t n_q = 11, n_kv = 17;
    const std::vector<float> q = random_floats(n_q * 4 * 24, 41), k = random_floats(n_kv * 2 * 24, 42),
                             v = random_floats(n_kv * 2 * 40, 43), m = random_floats(n_q * n_kv, 44, -2.0f, 0.0f);
    for (bool causal : {false, true}) {
        s.causal = causal;
        std::vector<float> outs[2];
        Backend* bes[2] = {cpu.get(), gpu.get()};
        for (int i = 0; i < 2; ++i) {
            const testing::Held qd = hold_f32(*bes[i], q, 96), kd = hold_f32(*bes[i], k, 48),
                                vd = hold_f32(*bes[i], v, 80), md = hold_f32(*bes[i], m, n_kv),
                                od = hold(*bes[i], DType::F32, 160, n_q);
            bes[i]->attention_dense(od.t, qd.t, kd.t, vd.t, md.t, s);
            outs[i] = download_f32(*bes[i], od.t);
        }
        EXPECT_LE(worst_error(outs[1], outs[0], 1e-5, 1e-4), 1.0) << "dense causal " << causal;
    }
    // conv1d / conv2d with a Q8_0 weight: GPU vs CPU (the CPU quantizes activations: 2e-2 relative
    // of the row's magnitude is its own error; the GPU multiplies in f32).
    const Conv1d c1{3, 2, 1};
    const size_t n_t = 19, n_in = 32, n_out = 13;
    std::vector<uint8_t> wq;
    std::vector<float> wf;
    quantized_rows(DType::Q8_0, n_in * 3, n_out, 51, &wq, &wf);
    const std::vector<float> x = random_floats(n_t * n_in, 52), bias = random_floats(n_out, 53);
    const size_t n_t_out = (n_t + 2 - 3) / 2 + 1;
    std::vector<float> outs[2];
    Backend* bes[2] = {cpu.get(), gpu.get()};
    for (int i = 0; i < 2; ++i) {
        const testing::Held wd = hold(*bes[i], DType::Q8_0, n_in * 3, n_out, wq.data()),
                            xd = hold_f32(*bes[i], x, n_in), bd = hold_f32(*bes[i], bias, n_out),
                            yd = hold(*bes[i], DType::F32, n_out, n_t_out);
        bes[i]->conv1d(yd.t, xd.t, wd.t, bd.t, c1);
        outs[i] = download_f32(*bes[i], yd.t);
    }
    EXPECT_LE(worst_error(outs[1], outs[0], 5e-2, 2e-2), 1.0) << "conv1d";
    Conv2d c2;
    c2.kernel_h = 3;
    c2.kernel_w = 2;
    c2.stride = 2;
    c2.pad = 1;
    c2.height = 7;
    c2.width = 9;
    const size_t planes = 16;  // weight width 16 * 3 * 2 = 96 = 3 Q8_0 blocks
    quantized_rows(DType::Q8_0, planes * 6, n_out, 61, &wq, &wf);
    const std::vector<float> img = random_floats(planes * 63, 62);
    const size_t h_out = (7 + 2 - 3) / 2 + 1, w_out = (9 + 2 - 2) / 2 + 1;
    for (int i = 0; i < 2; ++i) {
        const testing::Held wd = hold(*bes[i], DType::Q8_0, planes * 6, n_out, wq.data()),
                            xd = hold_f32(*bes[i], img, 63), bd = hold_f32(*bes[i], bias, n_out),
                            yd = hold(*bes[i], DType::F32, n_out, h_out * w_out);
        bes[i]->conv2d(yd.t, xd.t, wd.t, bd.t, c2);
        outs[i] = download_f32(*bes[i], yd.t);
    }
    EXPECT_LE(worst_error(outs[1], outs[0], 5e-2, 2e-2), 1.0) << "conv2d";
}

TEST(CudaFault, SpinningKernelTimesOutThenHandleRefusesAndDestroyReturns) {
    // The test-only hook: the first download enqueues a kernel spinning 4 s against a 1 s deadline.
    setenv("CACTUS_CUDA_FAULT_SPIN_MS", "4000", 1);
    std::string why;
    std::unique_ptr<Backend> be = testing::try_cuda(&why, 1000);
    unsetenv("CACTUS_CUDA_FAULT_SPIN_MS");
    if (!be) GTEST_SKIP() << "GPU test skipped: " << why;
    const std::vector<float> x = random_floats(64, 1);
    const testing::Held xd = hold_f32(*be, x, 64);
    const auto start = std::chrono::steady_clock::now();
    std::vector<float> out(64);
    try {
        be->download(out.data(), xd.t, 64 * sizeof(float));
        FAIL() << "download returned although the GPU was spinning";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("gpu_timeout_ms"), std::string::npos) << e.what();
    }
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LT(waited, 2.0) << "the call must return within the deadline + 1 s";
    EXPECT_GE(waited, 0.9);
    try {
        be->scale(xd.t, xd.t, 2.0f);
        FAIL() << "a broken handle accepted work";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("refuses"), std::string::npos) << e.what();
    }
    const auto destroy = std::chrono::steady_clock::now();
    be.reset();
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - destroy).count(), 1.0);
}

TEST(CudaSelection, UnknownDeviceIsAClearError) {
    BackendOptions o;
    o.device = "cuda:77";
    try {
        make_backend(o);
        FAIL() << "cuda:77 was accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("cuda:77"), std::string::npos) << e.what();
    }
    o.device = "cudax";
    EXPECT_THROW(make_backend(o), Error);
}

}  // namespace
}  // namespace cactus

namespace cactus {
namespace {

// Real-model shapes and magnitudes against the CPU backend (not the reference): RoPE of smollm2
// (NORMAL, base 1e5) and gemma3 (NEOX, base 1e6, head 256) at positions 0..40 with inputs up to
// 50; attention with sharp scores (q, k up to 6: softmax near one-hot) over a 9/3-head f16 cache.
TEST(CudaOps, RopeRealShapesMatchCpuBackend) {
    CACTUS_REQUIRE_CUDA(gpu);
    std::unique_ptr<Backend> cpu = make_backend(BackendOptions{});
    struct Case {
        RopeParams p;
        size_t n_head, head_dim;
    };
    for (const Case& c : {Case{{RopeStyle::NORMAL, 64, 100000.0f, 1.0f}, 9, 64},
                          Case{{RopeStyle::NEOX, 256, 1000000.0f, 1.0f}, 4, 256}}) {
        const size_t n = 41, w = c.n_head * c.head_dim;
        const std::vector<float> x = random_floats(n * w, 77, -50.0f, 50.0f);
        std::vector<int32_t> pos(n);
        for (size_t i = 0; i < n; ++i) pos[i] = static_cast<int32_t>(i);
        std::vector<float> out[2];
        Backend* bes[2] = {cpu.get(), gpu.get()};
        for (int i = 0; i < 2; ++i) {
            const testing::Held xd = hold_f32(*bes[i], x, w), pd = hold(*bes[i], DType::I32, 1, n, pos.data());
            bes[i]->rope(xd.t, c.n_head, pd.t, c.p);
            out[i] = download_f32(*bes[i], xd.t);
        }
        double worst = 0.0;
        for (size_t i = 0; i < out[0].size(); ++i) worst = std::max(worst, double(std::fabs(out[0][i] - out[1][i])));
        std::printf("[ rope %s ] largest |gpu - cpu| %.3g\n", c.p.style == RopeStyle::NEOX ? "neox" : "normal", worst);
        EXPECT_LE(worst_error(out[1], out[0], 1e-4, 1e-5), 1.0);
    }
}

TEST(CudaOps, SharpAttentionRealShapesMatchCpuBackend) {
    CACTUS_REQUIRE_CUDA(gpu);
    std::unique_ptr<Backend> cpu = make_backend(BackendOptions{});
    const size_t n_head = 9, n_head_kv = 3, d = 64, chunk = 29;
    KvLayerSpec spec;
    spec.k_width = n_head_kv * d;
    spec.v_width = n_head_kv * d;
    spec.n_head_kv = n_head_kv;
    KvCacheConfig config;
    config.n_ctx = 64;
    std::unique_ptr<KvCache> caches[2];
    Backend* bes[2] = {cpu.get(), gpu.get()};
    const std::vector<float> k = random_floats(chunk * spec.k_width, 81, -6.0f, 6.0f);
    const std::vector<float> v = random_floats(chunk * spec.v_width, 82, -3.0f, 3.0f);
    const std::vector<float> q = random_floats(chunk * n_head * d, 83, -6.0f, 6.0f);
    std::vector<float> out[2];
    for (int i = 0; i < 2; ++i) {
        Backend& be = *bes[i];
        caches[i] = std::make_unique<KvCache>(
            std::vector<KvLayerSpec>{spec}, config,
            [&be](const std::vector<KvLayerLayout>& l, KvType t) { return be.make_kv_storage(l, t); });
        caches[i]->reserve(chunk);
        caches[i]->append(chunk);
        std::vector<KvCache*> cs(chunk, caches[i].get());
        std::vector<size_t> tokens(chunk);
        for (size_t t = 0; t < chunk; ++t) tokens[t] = t;
        const KvBatch b{chunk, cs.data(), tokens.data()};
        const testing::Held kd = hold_f32(be, k, spec.k_width), vd = hold_f32(be, v, spec.v_width),
                            qd = hold_f32(be, q, n_head * d), od = hold(be, DType::F32, n_head * d, chunk);
        be.kv_store(0, b, kd.t, vd.t);
        be.attention_kv(od.t, 0, b, qd.t, n_head, 0.125f);
        out[i] = download_f32(be, od.t);
    }
    double worst = 0.0;
    for (size_t i = 0; i < out[0].size(); ++i) worst = std::max(worst, double(std::fabs(out[0][i] - out[1][i])));
    std::printf("[ sharp attention ] largest |gpu - cpu| %.3g\n", worst);
    EXPECT_LE(worst_error(out[1], out[0], 1e-3, 1e-3), 1.0);
}

}  // namespace
}  // namespace cactus
