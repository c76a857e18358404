#include "model/deepseek_v41/engram_hash.h"

#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/check.h"
#include "weights/safetensors.h"

namespace deepinfer::model::deepseek_v41 {
namespace {

using nlohmann::json;

std::string shape_str(const std::vector<int64_t>& s) {
    std::string r = "[";
    for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
    return r + "]";
}

// Copies tensor `name` (dtype `dtype`, shape `shape`) out of the file into `out`.
template <typename T>
core::Status read_tensor(const weights::SafetensorsFile& f, const std::string& name, core::DType dtype,
                         const std::vector<int64_t>& shape, std::vector<T>& out) {
    const weights::HeaderEntry* e = nullptr;
    for (const auto& t : f.header().tensors)
        if (t.name == name) e = &t;
    if (e == nullptr) return core::invalid_argument(f.name() + ": tensor '" + name + "' is missing");
    if (e->dtype != dtype)
        return core::invalid_argument(f.name() + ": tensor '" + name + "' has dtype " +
                                      std::string(core::dtype_name(e->dtype)) + ", expected " +
                                      std::string(core::dtype_name(dtype)));
    if (e->shape.to_vector() != shape)
        return core::invalid_argument(f.name() + ": tensor '" + name + "' has shape " +
                                      shape_str(e->shape.to_vector()) + ", the config implies " +
                                      shape_str(shape));
    out.resize(static_cast<size_t>(e->shape.numel()));
    std::memcpy(out.data(), f.data(*e), out.size() * sizeof(T));
    return {};
}

// Field `key` of the file's metadata object (`engram_hash`, JSON) must equal `want`.
core::Status check_meta(const weights::SafetensorsFile& f, const json& meta, const std::string& key,
                        const json& want, const std::string& config_field) {
    auto it = meta.find(key);
    if (it == meta.end())
        return core::invalid_argument(f.name() + ": metadata field 'engram_hash." + key + "' is missing");
    if (*it != want)
        return core::invalid_argument(f.name() + ": metadata field 'engram_hash." + key + "' is " +
                                      it->dump() + " but " + config_field + " is " + want.dump() +
                                      " (hash data made for another model or tokenizer)");
    return {};
}

} // namespace

core::Result<EngramHasher> EngramHasher::load(const std::string& path, const ModelConfig& c,
                                              const std::string& tokenizer_sha256) {
    const EngramConfig& ec = c.engram;
    if (!ec.enabled()) return core::invalid_argument(path + ": the config has no Engram layers");
    auto file = weights::SafetensorsFile::open(path, path);
    if (!file.ok()) return file.status();
    const weights::SafetensorsFile& f = **file;
    EngramHasher h;
    h.num_layers_ = static_cast<int64_t>(ec.layer_ids.size());
    h.max_ngram_ = ec.max_ngram_size;
    h.heads_ = ec.n_heads;
    h.cols_ = ec.n_hash_cols();
    auto mit = f.header().metadata.find("engram_hash");
    if (mit == f.header().metadata.end())
        return core::invalid_argument(path +
                                      ": metadata field 'engram_hash' is missing (not Engram hash data)");
    const json meta = json::parse(mit->second, nullptr, /*allow_exceptions=*/false);
    if (!meta.is_object())
        return core::invalid_argument(path + ": metadata field 'engram_hash' is not a JSON object");
    DI_RETURN_IF_ERROR(check_meta(f, meta, "layer_ids", json(ec.layer_ids), "engram_layer_ids"));
    DI_RETURN_IF_ERROR(
        check_meta(f, meta, "max_ngram_size", json(ec.max_ngram_size), "engram_max_ngram_size"));
    DI_RETURN_IF_ERROR(check_meta(f, meta, "n_heads", json(ec.n_heads), "engram_n_heads"));
    DI_RETURN_IF_ERROR(check_meta(f, meta, "compressed_vocab_size", json(ec.compressed_vocab_size),
                                  "engram_compressed_vocab_size"));
    DI_RETURN_IF_ERROR(check_meta(f, meta, "pad_token_id", json(ec.pad_token_id), "engram_pad_token_id"));
    DI_RETURN_IF_ERROR(
        check_meta(f, meta, "num_embeddings", json(ec.num_embeddings), "engram_num_embeddings"));
    if (!tokenizer_sha256.empty())
        DI_RETURN_IF_ERROR(check_meta(f, meta, "tokenizer_json_sha256", json(tokenizer_sha256),
                                      "the tokenizer.json sha256"));

    DI_RETURN_IF_ERROR(read_tensor(f, "token_map", core::DType::kI32, {c.vocab_size}, h.token_map_));
    DI_RETURN_IF_ERROR(
        read_tensor(f, "multipliers", core::DType::kI64, {h.num_layers_, h.max_ngram_}, h.multipliers_));
    DI_RETURN_IF_ERROR(
        read_tensor(f, "primes", core::DType::kI64, {h.num_layers_, h.max_ngram_ - 1, h.heads_}, h.primes_));
    DI_RETURN_IF_ERROR(read_tensor(f, "offsets", core::DType::kI64, {h.num_layers_, h.cols_}, h.offsets_));

    const int64_t cvs = ec.compressed_vocab_size;
    for (size_t t = 0; t < h.token_map_.size(); ++t)
        if (h.token_map_[t] < 0 || h.token_map_[t] >= cvs)
            return core::invalid_argument(
                path + ": token_map[" + std::to_string(t) + "] = " + std::to_string(h.token_map_[t]) +
                " is outside [0, engram_compressed_vocab_size = " + std::to_string(cvs) + ")");
    h.pad_compressed_ = h.token_map_[ec.pad_token_id];
    // Every product token·multiplier must fit int64 (the reference's bound: (INT64_MAX // cvs) // 2, x2+1).
    const int64_t max_mult = std::numeric_limits<int64_t>::max() / cvs;
    for (size_t i = 0; i < h.multipliers_.size(); ++i)
        if (h.multipliers_[i] <= 0 || h.multipliers_[i] > max_mult || h.multipliers_[i] % 2 == 0)
            return core::invalid_argument(path + ": multipliers[" + std::to_string(i) +
                                          "] must be odd and in (0, INT64_MAX / compressed_vocab_size]");
    for (int64_t e = 0; e < h.num_layers_; ++e) {
        int64_t total = 0;
        for (int64_t col = 0; col < h.cols_; ++col) {
            const int64_t p = h.primes_[e * h.cols_ + col];
            if (p < ec.vocab_size)
                return core::invalid_argument(path + ": primes[" + std::to_string(e) + "] has " +
                                              std::to_string(p) + " below engram_vocab_size " +
                                              std::to_string(ec.vocab_size));
            if (h.offsets_[e * h.cols_ + col] != total)
                return core::invalid_argument(path + ": offsets[" + std::to_string(e) + "][" +
                                              std::to_string(col) + "] is not the running sum of the primes");
            total += p;
        }
        if (total != ec.num_embeddings[e])
            return core::invalid_argument(path + ": the primes of Engram layer " +
                                          std::to_string(ec.layer_ids[e]) + " address " +
                                          std::to_string(total) + " rows but engram_num_embeddings says " +
                                          std::to_string(ec.num_embeddings[e]));
    }
    return h;
}

void EngramHasher::hash(std::span<const int64_t> tokens, std::span<const uint8_t> dead, NgramHistory& history,
                        std::vector<int64_t>& out) const {
    DI_CHECK(dead.empty() || dead.size() == tokens.size());
    const int64_t n = max_ngram_;
    std::vector<int64_t> tok(static_cast<size_t>(n));
    for (size_t i = 0; i < tokens.size(); ++i) {
        DI_CHECK(tokens[i] >= 0 && tokens[i] < static_cast<int64_t>(token_map_.size()))
            << "token " << tokens[i];
        const int64_t cur = !dead.empty() && dead[i] ? NgramHistory::kDead : token_map_[tokens[i]];
        history.recent.push_back(cur);
        if (static_cast<int64_t>(history.recent.size()) > n)
            history.recent.erase(history.recent.begin(), history.recent.end() - n);
        // tok[s]: the token s positions back; the start of the sequence or a DEAD token blocks it and
        // every farther slot.
        bool blocked = false;
        for (int64_t s = 0; s < n; ++s) {
            const int64_t back = static_cast<int64_t>(history.recent.size()) - 1 - s;
            blocked = blocked || back < 0 || history.recent[back] == NgramHistory::kDead;
            tok[s] = blocked ? pad_compressed_ : history.recent[back];
        }
        for (int64_t e = 0; e < num_layers_; ++e) {
            const int64_t* mult = &multipliers_[e * n];
            int64_t roll = tok[0] * mult[0];
            for (int64_t g = 1; g < n; ++g) { // n-gram size g + 1
                roll ^= tok[g] * mult[g];
                for (int64_t head = 0; head < heads_; ++head) {
                    const int64_t col = (g - 1) * heads_ + head;
                    out.push_back(roll % primes_[e * cols_ + col] + offsets_[e * cols_ + col]);
                }
            }
        }
    }
    if (static_cast<int64_t>(history.recent.size()) > n - 1)
        history.recent.erase(history.recent.begin(), history.recent.end() - (n - 1));
}

} // namespace deepinfer::model::deepseek_v41
