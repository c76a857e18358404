#pragma once
// Engram n-gram hashing (spec §3.3), exact int64, from the hash data the oracle computes offline and ships
// beside the checkpoint (`engram_hash.safetensors`: token_map, multipliers, primes, offsets; see
// tools/oracle/README.md "Tokenizer and Engram data"). Host-side integer code: no kernels involved.
//
// Per position p and Engram layer e: tok[s] = token_map[id[p - s]] for s = 0..N-1, where a slot before the
// sequence start or at/after a DEAD token (padding, image span) takes the pad's compressed id; then
// roll = tok[0]·mult[0]; for n = 2..N: roll ^= tok[n-1]·mult[n-1], and for each head h the id is
// roll % prime[n][h] + offset[n][h] (a row of the layer's table).

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/deepseek_v41/config.h"

namespace deepinfer::model::deepseek_v41 {

// The compressed ids of the last N-1 positions of one sequence (most recent last); carried across prefill
// chunks and decode steps. kDead marks a DEAD token; positions before the start are simply absent.
struct NgramHistory {
    static constexpr int64_t kDead = -1;
    std::vector<int64_t> recent;
};

class EngramHasher {
public:
    // Loads and checks `path` against the config (layers, N, heads, compressed vocabulary, pad id, table
    // rows = sum of primes, vocabulary size) and, when given, the sha256 of the tokenizer.json in use.
    // Errors name the file and the tensor or field.
    static core::Result<EngramHasher> load(const std::string& path, const ModelConfig& config,
                                           const std::string& tokenizer_sha256 = "");

    int64_t num_layers() const { return num_layers_; }
    int64_t num_cols() const { return cols_; } // (N-1) * heads
    int64_t compressed_id(int64_t token) const { return token_map_[token]; }

    // Hash ids of `tokens` (the next positions of a sequence whose history is `history`), appended to
    // `out` as [tokens.size(), num_layers, num_cols]; `dead` (optional, same length) marks DEAD tokens.
    // Token ids must be in [0, vocab) (DI_CHECK). Updates `history`.
    void hash(std::span<const int64_t> tokens, std::span<const uint8_t> dead, NgramHistory& history,
              std::vector<int64_t>& out) const;

private:
    int64_t num_layers_ = 0, max_ngram_ = 0, heads_ = 0, cols_ = 0, pad_compressed_ = 0;
    std::vector<int32_t> token_map_;   // [vocab]
    std::vector<int64_t> multipliers_; // [layers, N]
    std::vector<int64_t> primes_;      // [layers, N-1, heads]
    std::vector<int64_t> offsets_;     // [layers, cols]
};

} // namespace deepinfer::model::deepseek_v41
