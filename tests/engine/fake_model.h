#pragma once
// FakeModel: a CausalLm whose logits at position p are a hash of the tokens 0..p of that sequence, read
// back through the engine's KV plumbing. Each KV entry stores (token, hash of the prefix ending there);
// the slot carries the running hash like a compressor carries its state; a block's last position writes a
// boundary snapshot. forward() fails with a clear Status whenever the engine hands it an inconsistent
// batch: a slot not reset/restored, a block table pointing at unwritten or foreign blocks, a restore
// without a snapshot, padding outside scratch. So wrong bookkeeping shows up as an error or as tokens
// that differ from a solo run.

#include <cmath>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "model/causal_lm.h"

namespace deepinfer::engine::testing {

inline uint64_t fake_mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}
inline uint64_t fake_extend(uint64_t h, int32_t token) {
    return fake_mix(h * 31 + 0x9e37 + uint64_t(token));
}
constexpr uint64_t kFakeInitialHash = 0x1234567ULL;

class FakeModel : public model::CausalLm {
public:
    explicit FakeModel(int64_t vocab = 64, int64_t eos = 0, int64_t max_position = 1 << 20, int64_t ratio = 4)
        : vocab_(vocab), eos_(eos), max_position_(max_position), ratio_(ratio) {}

    int64_t vocab_size() const override { return vocab_; }
    int64_t eos_token_id() const override { return eos_; }
    core::Result<model::KvGeometry> kv_geometry(int64_t block_size) const override {
        if (block_size <= 0 || block_size % ratio_ != 0)
            return core::invalid_argument("block size " + std::to_string(block_size) +
                                          " is not a multiple of the compression ratio " +
                                          std::to_string(ratio_));
        return model::KvGeometry{block_size, block_size * 16, 64, max_position_};
    }
    core::Status init_kv_cache(const model::KvCacheSpec& spec) override {
        spec_ = spec;
        entries_.assign(size_t(spec.num_blocks + 1) * spec.block_size, Entry{});
        snapshots_.assign(spec.num_blocks + 1, Snapshot{});
        slots_.assign(spec.num_slots + 1, Slot{});
        return {};
    }

    // Logits of the row whose prefix hash is h (public so tests can compute expected greedy tokens).
    static void logits_for(uint64_t h, int64_t vocab, float* out) {
        for (int64_t v = 0; v < vocab; ++v)
            out[v] =
                float(double(fake_mix(h ^ (uint64_t(v) * 0x9e3779b97f4a7c15ULL)) >> 40) / double(1 << 24)) *
                    8.0f -
                4.0f;
    }

    core::Status forward(const model::ForwardBatch& b, float* logits) override {
        ++forward_calls;
        if (fail_at_call == forward_calls) return fail("injected failure");
        const int64_t bs = spec_.block_size;
        if (b.positions.size() != b.token_ids.size()) return fail("positions and tokens differ in length");
        std::set<int32_t> slots_seen;
        size_t next_row = 0, next_offset = 0;
        std::vector<uint64_t> row_hash(b.token_ids.size(), 0);
        for (const auto& c : b.chunks) {
            if (size_t(c.token_offset) != next_offset) return fail("chunk offsets not contiguous");
            next_offset += c.num_tokens;
            if (next_offset > b.token_ids.size()) return fail("chunk past the batch");
            if (c.is_padding) {
                padding_rows += c.num_tokens;
                if (c.slot != spec_.num_slots) return fail("padding chunk outside the scratch slot");
                for (int32_t blk : c.block_table)
                    if (blk != spec_.num_blocks) return fail("padding chunk outside the scratch block");
                continue;
            }
            if (c.slot < 0 || c.slot >= spec_.num_slots) return fail("slot out of range");
            if (!slots_seen.insert(c.slot).second) return fail("slot used twice in one batch");
            if (int64_t(c.block_table.size()) * bs < c.start_pos + c.num_tokens)
                return fail("block table does not cover the chunk");
            for (int32_t blk : c.block_table)
                if (blk < 0 || blk >= spec_.num_blocks) return fail("block id out of range");
            Slot& s = slots_[c.slot];
            if (c.reset_slot) s = Slot{kFakeInitialHash, 0, true};
            if (c.restore_slot_from_block) {
                if (c.start_pos == 0 || c.start_pos % bs != 0) return fail("restore not at a block boundary");
                const Snapshot& snap = snapshots_[c.block_table[c.start_pos / bs - 1]];
                if (!snap.valid) return fail("restore from a block without a boundary snapshot");
                s = Slot{snap.hash, c.start_pos, true};
            }
            if (!s.valid) return fail("slot used before reset");
            if (s.pos != c.start_pos)
                return fail("slot state at position " + std::to_string(s.pos) + " but chunk starts at " +
                            std::to_string(c.start_pos) + " (seq " + std::to_string(c.seq_id) + ")");
            // Read back the KV the chunk attends to: the last few rows must chain into the slot state, and
            // every earlier block must hold written rows ("compressed entries").
            if (c.start_pos > 0) {
                const Entry& last = at(c.block_table, c.start_pos - 1);
                if (last.token < 0 || last.hash != s.hash)
                    return fail("KV row before the chunk does not match");
                for (int64_t p = std::max<int64_t>(1, c.start_pos - 8); p < c.start_pos; ++p) {
                    const Entry& e = at(c.block_table, p);
                    if (e.token < 0 || e.hash != fake_extend(at(c.block_table, p - 1).hash, e.token))
                        return fail("KV window rows corrupted at position " + std::to_string(p));
                }
                for (int64_t blk = 0; blk * bs < c.start_pos; ++blk)
                    if (at(c.block_table, blk * bs).token < 0) return fail("attends to an unwritten block");
            }
            for (int32_t i = 0; i < c.num_tokens; ++i) {
                int64_t row = c.token_offset + i;
                int64_t p = c.start_pos + i;
                if (b.positions[row] != p) return fail("position mismatch");
                int32_t tok = b.token_ids[row];
                if (tok < 0 || tok >= vocab_) return fail("token out of vocab");
                int32_t blk = c.block_table[p / bs];
                if (p % bs == 0) snapshots_[blk].valid = false; // the block is being rewritten
                s.hash = fake_extend(s.hash, tok);
                s.pos = p + 1;
                entries_[size_t(blk) * bs + p % bs] = Entry{tok, s.hash};
                if ((p + 1) % bs == 0) snapshots_[blk] = Snapshot{s.hash, true};
                row_hash[row] = s.hash;
                ++real_rows;
            }
        }
        if (next_offset != b.token_ids.size()) return fail("chunks do not cover the batch");
        for (int32_t row : b.logits_rows) {
            if (row < 0 || size_t(row) >= b.token_ids.size()) return fail("logits row out of range");
            logits_for(row_hash[row], vocab_, logits + next_row * vocab_);
            ++next_row;
        }
        return {};
    }

    void copy_block(int32_t src, int32_t dst) override {
        const int64_t bs = spec_.block_size;
        for (int64_t i = 0; i < bs; ++i) entries_[size_t(dst) * bs + i] = entries_[size_t(src) * bs + i];
        snapshots_[dst] = snapshots_[src];
        ++block_copies;
    }
    void copy_slot(int32_t src, int32_t dst) override {
        slots_[dst] = slots_[src];
        ++slot_copies;
    }

    int64_t forward_calls = 0, real_rows = 0, padding_rows = 0, block_copies = 0, slot_copies = 0;
    int64_t fail_at_call = -1; // forward() number that returns an error (tests of the error path)
    std::string last_error;

private:
    struct Entry {
        int32_t token = -1;
        uint64_t hash = 0;
    };
    struct Snapshot {
        uint64_t hash = 0;
        bool valid = false;
    };
    struct Slot {
        uint64_t hash = 0;
        int64_t pos = 0;
        bool valid = false;
    };
    const Entry& at(const std::vector<int32_t>& table, int64_t p) const {
        return entries_[size_t(table[p / spec_.block_size]) * spec_.block_size + p % spec_.block_size];
    }
    core::Status fail(const std::string& m) {
        last_error = m;
        return core::internal_error("FakeModel: " + m);
    }

    int64_t vocab_, eos_, max_position_, ratio_;
    model::KvCacheSpec spec_;
    std::vector<Entry> entries_;
    std::vector<Snapshot> snapshots_;
    std::vector<Slot> slots_;
};

// The greedy continuation the fake model defines, computed without the engine: argmax over logits of
// each prefix, stopping at EOS (unless ignore_eos) or max_tokens.
inline std::vector<int32_t> fake_greedy(const std::vector<int32_t>& prompt, int32_t max_tokens, int64_t vocab,
                                        int64_t eos) {
    uint64_t h = kFakeInitialHash;
    for (int32_t t : prompt) h = fake_extend(h, t);
    std::vector<int32_t> out;
    std::vector<float> l(vocab);
    while (int32_t(out.size()) < max_tokens) {
        FakeModel::logits_for(h, vocab, l.data());
        int32_t best = 0;
        for (int32_t v = 1; v < vocab; ++v)
            if (l[v] > l[best]) best = v;
        out.push_back(best);
        if (best == eos) break;
        h = fake_extend(h, best);
    }
    return out;
}

} // namespace deepinfer::engine::testing
