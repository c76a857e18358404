#pragma once
// A bump arena for one forward pass. The model plans it once (reserve) from max_num_batched_tokens /
// max_num_seqs; every forward takes its buffers with take<T>(n) and releases them all with reset(). If a
// plan was short, take() chains an extra chunk (an allocation outside the steady state) and the next
// reset() folds everything into one chunk of the high-water size, so the following steps allocate nothing.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace deepinfer::kernels {

class Workspace {
public:
    Workspace() = default;
    Workspace(const Workspace&) = delete;
    Workspace& operator=(const Workspace&) = delete;

    // Make room for `bytes` (plus alignment slack) in one chunk. Drops everything taken.
    void reserve(int64_t bytes);
    // Uninitialized storage for n elements, 64-byte aligned.
    template <typename T> T* take(int64_t n) {
        return static_cast<T*>(take_bytes(n * static_cast<int64_t>(sizeof(T))));
    }
    void* take_bytes(int64_t bytes);
    // Release every buffer taken since the last reset (no free: the chunk is reused).
    void reset();
    // Scoped scratch: release(mark()) drops what was taken after the mark (ops' temporary buffers).
    struct Mark {
        size_t chunks = 0;
        int64_t top = 0, used = 0;
    };
    Mark mark() const { return chunks_.empty() ? Mark{} : Mark{chunks_.size(), chunks_.back().top, used_}; }
    void release(const Mark& m) {
        if (m.chunks == 0 || m.chunks != chunks_.size()) return; // a chunk was chained: folded at reset()
        chunks_.back().top = m.top;
        used_ = m.used;
    }

    int64_t capacity() const { return capacity_; }
    int64_t used() const { return used_; }
    int64_t high_water() const { return high_water_; }
    int64_t growths() const { return growths_; } // chunks chained because a plan was short

private:
    static constexpr int64_t kAlign = 64;
    struct Chunk {
        std::unique_ptr<std::byte[]> mem;
        int64_t size = 0;
        int64_t top = 0;
    };
    std::vector<Chunk> chunks_; // chunks_[0] is the planned one
    int64_t capacity_ = 0;
    int64_t used_ = 0; // bytes taken since reset, all chunks, with alignment padding
    int64_t high_water_ = 0;
    int64_t growths_ = 0;
};

} // namespace deepinfer::kernels
