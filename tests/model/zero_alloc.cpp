// A steady-state decode step allocates nothing: global operator new is replaced by a counting one and a
// tiny-v4 sequence (and a batch of two) is decoded through DeepseekV4Model with a planned workspace on a
// runner-owned pool. Allocations made inside kernels::matmul (src/kernels/cpu/, the SIMD matmul's own
// business) are counted apart through a backend decorator and reported. ZA_TRAP=1 traps at the first
// counted allocation outside matmul: run it under gdb to see where it came from.

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <vector>

#include <gtest/gtest.h>

#include "core/thread_pool.h"
#include "kernels/cpu/backend.h"
#include "model/deepseek_v4/model.h"
#include "model/sequence_runner.h"

namespace {
std::atomic<bool> g_counting{false};
std::atomic<bool> g_in_linear{false};
std::atomic<int64_t> g_allocs{0};        // outside kernels::matmul
std::atomic<int64_t> g_linear_allocs{0}; // inside it

void* counted(std::size_t n, std::size_t align) {
    if (g_counting.load(std::memory_order_relaxed))
        (g_in_linear.load(std::memory_order_relaxed) ? g_linear_allocs : g_allocs)
            .fetch_add(1, std::memory_order_relaxed);
    if (g_counting && !g_in_linear && std::getenv("ZA_TRAP")) __builtin_trap();
    void* p = align > alignof(std::max_align_t) ? std::aligned_alloc(align, (n + align - 1) / align * align)
                                                : std::malloc(n ? n : 1);
    if (!p) throw std::bad_alloc();
    return p;
}
} // namespace

void* operator new(std::size_t n) {
    return counted(n, 0);
}
void* operator new[](std::size_t n) {
    return counted(n, 0);
}
void* operator new(std::size_t n, std::align_val_t a) {
    return counted(n, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t n, std::align_val_t a) {
    return counted(n, static_cast<std::size_t>(a));
}
void operator delete(void* p) noexcept {
    std::free(p);
}
void operator delete[](void* p) noexcept {
    std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
    std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
    std::free(p);
}
void operator delete(void* p, std::align_val_t) noexcept {
    std::free(p);
}
void operator delete[](void* p, std::align_val_t) noexcept {
    std::free(p);
}
void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
    std::free(p);
}
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept {
    std::free(p);
}

namespace deepinfer::model::deepseek_v4 {
namespace {

// The CPU backend, with its matmul calls marked so their allocations are attributed to kernels::matmul.
class MarkingBackend : public kernels::cpu::CpuBackend {
public:
    using CpuBackend::CpuBackend;

protected:
    void run_linear(const kernels::MatmulArgs& a) override {
        g_in_linear = true;
        CpuBackend::run_linear(a);
        g_in_linear = false;
    }
    void run_linear_multi(std::span<const kernels::MatmulArgs> args) override {
        g_in_linear = true;
        CpuBackend::run_linear_multi(args);
        g_in_linear = false;
    }
};

struct Counts {
    int64_t outside = 0, in_matmul = 0;
};

// Runs `steps` forwards of `b` (advancing every chunk one position per step) while counting.
Counts count_decode(DeepseekV4Model& m, ForwardBatch& b, std::vector<float>& logits, int steps) {
    auto advance = [&] {
        for (SequenceChunk& ch : b.chunks) {
            ch.start_pos += 1;
            ch.reset_slot = false;
            b.positions[ch.token_offset] = ch.start_pos;
            b.token_ids[ch.token_offset] =
                argmax(logits.data() + ch.token_offset * m.vocab_size(), m.vocab_size());
        }
    };
    g_allocs = 0;
    g_linear_allocs = 0;
    g_counting = true;
    for (int s = 0; s < steps; ++s) {
        const core::Status st = m.forward(b, logits.data());
        if (!st.ok()) ADD_FAILURE() << st.to_string();
        advance();
    }
    g_counting = false;
    return {g_allocs.load(), g_linear_allocs.load()};
}

TEST(ZeroAlloc, SteadyStateDecodeAllocatesNothing) {
    auto loaded = DeepseekV4Model::load(std::string(DEEPINFER_SOURCE_DIR) + "/models/tiny-v4");
    ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
    DeepseekV4Model& m = **loaded;
    core::ThreadPool pool(2); // the runner's pool
    ASSERT_TRUE(m.configure_runtime({32, 2}).ok());
    m.set_backend(std::make_unique<MarkingBackend>(&pool));
    const int64_t bs = 8;
    ASSERT_TRUE(m.init_kv_cache({bs, 16, 2}).ok());
    const int64_t planned = m.backend().workspace().capacity();

    // Two sequences: a prompt each (one batched prefill of 2 x 13 tokens), then decode steps of both.
    const int64_t V = m.vocab_size(), P = 13;
    ForwardBatch b;
    for (int32_t s = 0; s < 2; ++s) {
        SequenceChunk ch;
        ch.seq_id = s;
        ch.slot = s;
        ch.num_tokens = static_cast<int32_t>(P);
        ch.token_offset = static_cast<int32_t>(s * P);
        ch.reset_slot = true;
        for (int32_t k = 0; k < 8; ++k) ch.block_table.push_back(s * 8 + k);
        for (int64_t i = 0; i < P; ++i) {
            b.token_ids.push_back(static_cast<int32_t>(2 + (7 * i + 31 * s) % (V - 2)));
            b.positions.push_back(i);
        }
        b.logits_rows.push_back(static_cast<int32_t>(s * P + P - 1));
        b.chunks.push_back(ch);
    }
    std::vector<float> logits(2 * V);
    ASSERT_TRUE(m.forward(b, logits.data()).ok());

    ForwardBatch d;
    d.chunks = b.chunks;
    for (int32_t s = 0; s < 2; ++s) {
        d.chunks[s].num_tokens = 1;
        d.chunks[s].token_offset = s;
        d.chunks[s].start_pos = P - 1; // advanced to P before the first step
        d.token_ids.push_back(0);
        d.positions.push_back(0);
        d.logits_rows.push_back(s);
    }
    for (SequenceChunk& ch : d.chunks) {
        ch.reset_slot = false;
    }
    // Position the batch at P (first decode step) with the prefill's greedy tokens.
    for (int32_t s = 0; s < 2; ++s) {
        d.chunks[s].start_pos = P;
        d.positions[s] = P;
        d.token_ids[s] = argmax(logits.data() + s * V, V);
    }
    // Warm-up steps (first-touch of everything), then the counted steady state: positions cross a block
    // boundary (16) and several compressor windows (ratios 4 and 8) inside the counted range.
    std::vector<float> dlog(2 * V);
    ASSERT_TRUE(m.forward(d, dlog.data()).ok());
    for (int32_t s = 0; s < 2; ++s) {
        d.chunks[s].start_pos += 1;
        d.positions[s] += 1;
        d.token_ids[s] = argmax(dlog.data() + s * V, V);
    }
    const Counts c = count_decode(m, d, dlog, 12);
    EXPECT_EQ(c.outside, 0) << "heap allocations in 12 steady-state decode steps outside kernels::matmul";
    EXPECT_EQ(c.in_matmul, 0) << "heap allocations in 12 steady-state decode steps inside kernels::matmul";
    std::printf("allocations in 12 decode steps: %lld outside kernels::matmul, %lld inside it\n",
                static_cast<long long>(c.outside), static_cast<long long>(c.in_matmul));
    RecordProperty("matmul_allocations", static_cast<int>(c.in_matmul));
    // The plan from max_num_batched_tokens covered the prefill: the workspace never had to grow.
    EXPECT_EQ(m.backend().workspace().growths(), 0);
    EXPECT_EQ(m.backend().workspace().capacity(), planned);
    EXPECT_LE(m.backend().workspace().high_water(), planned);
}

// A prefill longer than any step before it allocates nothing either: the kernels' per-thread matmul scratch
// is planned from max_num_batched_tokens by configure_runtime (Backend::reserve_scratch), not grown by the
// first step that needs more. Before, a server's heap grew whenever a busier moment batched more tokens into
// one step than any step before it (the load test's baseline moved by up to ~700 KiB from run to run).
TEST(ZeroAlloc, ALongerStepThanAnyBeforeAllocatesNoMatmulScratch) {
    auto loaded = DeepseekV4Model::load(std::string(DEEPINFER_SOURCE_DIR) + "/models/tiny-v4");
    ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
    DeepseekV4Model& m = **loaded;
    core::ThreadPool pool(2);
    const int64_t T = 96;
    ASSERT_TRUE(m.configure_runtime({T, 2}).ok());
    m.set_backend(std::make_unique<MarkingBackend>(&pool));
    const int64_t bs = 8;
    ASSERT_TRUE(m.init_kv_cache({bs, 32, 2}).ok());
    const int64_t V = m.vocab_size();
    // A prompt of `len` tokens in slot `s` (blocks 16 s ..).
    auto prompt = [&](int32_t s, int64_t len) {
        ForwardBatch b;
        SequenceChunk ch;
        ch.seq_id = s;
        ch.slot = s;
        ch.num_tokens = static_cast<int32_t>(len);
        ch.reset_slot = true;
        for (int32_t k = 0; k < 16; ++k) ch.block_table.push_back(s * 16 + k);
        for (int64_t i = 0; i < len; ++i) {
            b.token_ids.push_back(static_cast<int32_t>(2 + (7 * i + 31 * s) % (V - 2)));
            b.positions.push_back(i);
        }
        b.logits_rows.push_back(static_cast<int32_t>(len - 1));
        b.chunks.push_back(ch);
        return b;
    };
    std::vector<float> logits(V);
    ForwardBatch small = prompt(0, 5), large = prompt(1, T);
    ASSERT_TRUE(m.forward(small, logits.data()).ok()); // first touch of everything at a small size
    g_allocs = 0;
    g_linear_allocs = 0;
    g_counting = true;
    const core::Status st = m.forward(large, logits.data());
    g_counting = false;
    ASSERT_TRUE(st.ok()) << st.to_string();
    std::printf("allocations in a %lld-token prefill after a 5-token one: %lld outside kernels::matmul, %lld "
                "inside it\n",
                static_cast<long long>(T), static_cast<long long>(g_allocs.load()),
                static_cast<long long>(g_linear_allocs.load()));
    EXPECT_EQ(g_linear_allocs.load(), 0) << "the matmuls grew their scratch in a step within the plan";
    EXPECT_EQ(g_allocs.load(), 0) << "heap allocations outside kernels::matmul in a step within the plan";
}

} // namespace
} // namespace deepinfer::model::deepseek_v4
