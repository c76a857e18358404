// Random V4 checkpoints in the release format (synthetic.h): plan the stored tensors, split them into
// shards, draw and encode each shard's tensors in parallel (one random stream per tensor), write.

#include "model/deepseek_v4/synthetic.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "weights/quantize.h"
#include "weights/safetensors_writer.h"

namespace deepinfer::model::deepseek_v4 {
namespace {

using core::DType;

uint64_t splitmix64(uint64_t& state) {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// splitmix64 stream seeded from (seed, tensor name): uniforms for the mHC scales and the hash-routing table.
class Rng {
public:
    Rng(uint64_t seed, const std::string& name) {
        uint64_t h = 0xCBF29CE484222325ull; // FNV-1a of the name
        for (unsigned char ch : name) h = (h ^ ch) * 0x100000001B3ull;
        state_ = seed ^ h;
        splitmix64(state_);
    }
    uint64_t next() { return splitmix64(state_); }
    double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; } // [0, 1)
    uint64_t state() const { return state_; }

private:
    uint64_t state_;
};

// v[i] = mean + stddev * z_i, z_i of mean 0 and variance 1: the sum of the four 16-bit quarters of the i-th
// splitmix64 output (Irwin-Hall of 4 uniforms, a bell bounded at ±2√3 σ), recentred and scaled. Value i
// depends on i alone (splitmix64 is a counter hash), so the loop has no carried state and vectorizes; it is
// ~30x cheaper than Box-Muller's log and sincos, which dominated make-synthetic's time.
void fill_normal_fast(float* v, int64_t n, uint64_t state, float mean, float stddev) {
    constexpr uint64_t kGamma = 0x9E3779B97F4A7C15ull;
    const float scale = stddev * 1.7320508f / 65536.0f; // √3 / 2^16: the quarters' sum has variance 2^32/3
    const float offset = mean - stddev * 1.7320508f * 2.0f;
    for (int64_t i = 0; i < n; ++i) {
        uint64_t z = state + static_cast<uint64_t>(i + 1) * kGamma;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        const uint32_t q = static_cast<uint32_t>(z & 0xFFFF) + static_cast<uint32_t>((z >> 16) & 0xFFFF) +
                           static_cast<uint32_t>((z >> 32) & 0xFFFF) + static_cast<uint32_t>(z >> 48);
        // (q + 2) / 2^16: each quarter (k + 0.5) / 2^16, uniform on (0, 1) and symmetric about 1/2.
        v[i] = offset + scale * static_cast<float>(q + 2);
    }
}

bool ends_with(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
bool contains(const std::string& s, const std::string& part) {
    return s.find(part) != std::string::npos;
}

enum class Store { kBF16, kF32, kI64, kFp8, kFp4 };

// Storage per tensor class, as in DeepSeek's release (spec §4.1; tools/oracle storage_kind).
Store store_of(const TensorSpec& spec, bool fp8) {
    const std::string& n = spec.name;
    if (ends_with(n, ".tid2eid")) return Store::kI64;
    if (n.rfind("hc_", 0) == 0 || contains(n, ".hc_") || ends_with(n, ".attn_sink") || ends_with(n, ".ape") ||
        ends_with(n, ".gate.bias"))
        return Store::kF32;
    if (fp8 && spec.linear) {
        if (contains(n, ".ffn.experts.")) return Store::kFp4;
        for (const char* p : {".attn.wq_a.", ".attn.wq_b.", ".attn.wkv.", ".attn.wo_a.", ".attn.wo_b.",
                              ".attn.indexer.wq_b.", ".ffn.shared_experts."})
            if (contains(n, p)) return Store::kFp8;
    }
    return Store::kBF16;
}

struct Blob {
    std::string name;
    DType dtype;
    core::Shape shape;
    std::vector<uint8_t> bytes;
};

// One spec's stored tensors: the weight, and its `.scale` when quantized.
struct Unit {
    const TensorSpec* spec;
    Store store;
    int64_t bytes = 0;
};

std::string scale_name(const std::string& weight_name) {
    return weight_name.substr(0, weight_name.size() - std::string(".weight").size()) + ".scale";
}

int64_t unit_bytes(const ModelConfig& c, const TensorSpec& s, Store st) {
    const int64_t n = s.shape.numel();
    switch (st) {
    case Store::kBF16:
        return 2 * n;
    case Store::kF32:
        return 4 * n;
    case Store::kI64:
        return 8 * n;
    case Store::kFp8: {
        const int64_t br = c.quant.block_rows, bc = c.quant.block_cols;
        return n + ((s.shape[0] + br - 1) / br) * ((s.shape[1] + bc - 1) / bc);
    }
    case Store::kFp4:
        return n / 2 + s.shape[0] * (s.shape[1] / c.quant.fp4_group);
    }
    return 0;
}

std::vector<Blob> make_unit(const ModelConfig& c, const Unit& u, uint64_t seed) {
    const TensorSpec& s = *u.spec;
    std::vector<Blob> out;
    if (u.store == Store::kI64) {
        const std::vector<int64_t> v = synthetic_tid2eid(c, s.name, seed);
        Blob b{s.name, DType::kI64, s.shape, std::vector<uint8_t>(v.size() * 8)};
        std::memcpy(b.bytes.data(), v.data(), b.bytes.size());
        out.push_back(std::move(b));
        return out;
    }
    const std::vector<float> v = synthetic_values(s, seed);
    const int64_t n = static_cast<int64_t>(v.size());
    switch (u.store) {
    case Store::kF32: {
        Blob b{s.name, DType::kF32, s.shape, std::vector<uint8_t>(n * 4)};
        std::memcpy(b.bytes.data(), v.data(), b.bytes.size());
        out.push_back(std::move(b));
        break;
    }
    case Store::kBF16: {
        Blob b{s.name, DType::kBF16, s.shape, std::vector<uint8_t>(n * 2)};
        auto* dst = reinterpret_cast<uint16_t*>(b.bytes.data());
        for (int64_t i = 0; i < n; ++i) dst[i] = core::f32_to_bf16(v[i]);
        out.push_back(std::move(b));
        break;
    }
    case Store::kFp8: {
        const int64_t rows = s.shape[0], cols = s.shape[1], br = c.quant.block_rows, bc = c.quant.block_cols;
        const core::Shape ss{(rows + br - 1) / br, (cols + bc - 1) / bc};
        Blob w{s.name, DType::kF8E4M3, s.shape, std::vector<uint8_t>(n)};
        Blob sc{scale_name(s.name), DType::kF8E8M0, ss, std::vector<uint8_t>(ss.numel())};
        weights::quantize_fp8_block(v.data(), rows, cols, c.quant.block_rows, c.quant.block_cols,
                                    w.bytes.data(), sc.bytes.data());
        out.push_back(std::move(w));
        out.push_back(std::move(sc));
        break;
    }
    case Store::kFp4: {
        const int64_t rows = s.shape[0], cols = s.shape[1], g = c.quant.fp4_group;
        Blob w{s.name, DType::kI8, core::Shape{rows, cols / 2}, std::vector<uint8_t>(n / 2)};
        Blob sc{scale_name(s.name), DType::kF8E8M0, core::Shape{rows, cols / g},
                std::vector<uint8_t>(rows * (cols / g))};
        weights::quantize_fp4_group(v.data(), rows, cols, c.quant.fp4_group, w.bytes.data(), sc.bytes.data());
        out.push_back(std::move(w));
        out.push_back(std::move(sc));
        break;
    }
    case Store::kI64:
        break;
    }
    return out;
}

core::Status write_text(const std::string& path, const std::string& text) {
    std::ofstream f(path, std::ios::binary);
    if (!f) return core::io_error(path + ": cannot open for writing");
    f << text;
    if (!f.flush()) return core::io_error(path + ": write failed");
    return core::Status();
}

std::string shard_name(size_t i, size_t n) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "model-%05zu-of-%05zu.safetensors", i + 1, n);
    return buf;
}

} // namespace

std::vector<float> synthetic_values(const TensorSpec& spec, uint64_t seed) {
    const std::string& n = spec.name;
    Rng rng(seed, n);
    std::vector<float> v(spec.shape.numel());
    auto fill_normal = [&](float mean, float stddev) {
        fill_normal_fast(v.data(), static_cast<int64_t>(v.size()), rng.state(), mean, stddev);
    };
    if (ends_with(n, "_scale") && (n.rfind("hc_", 0) == 0 || contains(n, ".hc_"))) {
        for (float& x : v) x = 0.5f + static_cast<float>(rng.uniform()); // mHC scales, as the oracle draws
    } else if (contains(n, "norm") && ends_with(n, ".weight")) {
        fill_normal(1.0f, 0.1f);
    } else if (ends_with(n, ".gate.bias")) {
        fill_normal(0.0f, 0.1f);
    } else if (ends_with(n, "_base") || ends_with(n, ".attn_sink") || ends_with(n, ".ape")) {
        fill_normal(0.0f, 0.5f);
    } else if (n == "embed.weight") {
        fill_normal(0.0f, 1.0f);
    } else { // matrices: N(0, 1/sqrt(in)) keeps every projection's output at the scale of its input
        const int64_t in = spec.shape.ndim() >= 2 ? spec.shape[spec.shape.ndim() - 1] : spec.shape.numel();
        fill_normal(0.0f, static_cast<float>(1.0 / std::sqrt(static_cast<double>(in))));
    }
    return v;
}

std::vector<int64_t> synthetic_tid2eid(const ModelConfig& c, const std::string& name, uint64_t seed) {
    Rng rng(seed, name);
    const int64_t E = c.n_routed_experts, K = c.num_experts_per_tok;
    std::vector<int64_t> out(c.vocab_size * K), perm(E);
    for (int64_t t = 0; t < c.vocab_size; ++t) {
        for (int64_t e = 0; e < E; ++e) perm[e] = e;
        for (int64_t k = 0; k < K; ++k) { // partial Fisher-Yates: K distinct experts
            const int64_t j = k + static_cast<int64_t>(rng.next() % static_cast<uint64_t>(E - k));
            std::swap(perm[k], perm[j]);
            out[t * K + k] = perm[k];
        }
    }
    return out;
}

core::Status write_synthetic_checkpoint(const ModelConfig& c, const SyntheticOptions& o,
                                        const std::string& dir) {
    DI_RETURN_IF_ERROR(c.validate("synthetic config"));
    if (c.quant.fp8 &&
        (c.hidden_size % c.quant.fp4_group != 0 || c.moe_intermediate_size % c.quant.fp4_group != 0))
        return core::invalid_argument("fp8 checkpoints store routed experts as FP4 groups of " +
                                      std::to_string(c.quant.fp4_group) +
                                      ": hidden_size and moe_intermediate_size must be multiples of it");
    DI_ASSIGN_OR_RETURN(std::string config_json, official_config_json(c));
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return core::io_error(dir + ": cannot create directory: " + ec.message());
    DI_RETURN_IF_ERROR(write_text(dir + "/config.json", config_json));

    const std::vector<TensorSpec> specs = required_tensors(c);
    std::vector<Unit> units;
    int64_t total = 0;
    for (const TensorSpec& s : specs) {
        const Store st = store_of(s, c.quant.fp8);
        units.push_back({&s, st, unit_bytes(c, s, st)});
        total += units.back().bytes;
    }
    // Greedy shards in spec order (top-level tensors, then layer by layer, as DeepSeek's shards are).
    std::vector<std::pair<size_t, size_t>> shards; // [begin, end) of units
    const int64_t limit = std::max<int64_t>(o.shard_bytes, 1);
    for (size_t i = 0; i < units.size();) {
        size_t j = i;
        int64_t bytes = 0;
        while (j < units.size() && (j == i || bytes + units[j].bytes <= limit)) bytes += units[j++].bytes;
        shards.emplace_back(i, j);
        i = j;
    }
    const bool sharded = total > limit;
    nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
    for (size_t si = 0; si < shards.size(); ++si) {
        const auto [b, e] = shards[si];
        const std::string file = sharded ? shard_name(si, shards.size()) : "model.safetensors";
        std::vector<std::vector<Blob>> blobs(e - b);
        core::ThreadPool::global().parallel_for(static_cast<int64_t>(e - b), [&](int64_t lo, int64_t hi) {
            for (int64_t k = lo; k < hi; ++k) blobs[k] = make_unit(c, units[b + k], o.seed);
        });
        // Contiguous data with every tensor aligned to its element size (safetensors allows no holes):
        // wider dtypes first, as the reference writers order them.
        std::vector<Blob*> order;
        for (auto& group : blobs)
            for (Blob& blob : group) order.push_back(&blob);
        std::stable_sort(order.begin(), order.end(), [](const Blob* x, const Blob* y) {
            return core::dtype_size(x->dtype) > core::dtype_size(y->dtype);
        });
        weights::SafetensorsWriter w;
        w.set_metadata("format", "pt");
        for (Blob* blob : order) {
            w.add(blob->name, blob->dtype, blob->shape, blob->bytes.data());
            weight_map[blob->name] = file;
            std::vector<uint8_t>().swap(blob->bytes);
        }
        DI_RETURN_IF_ERROR(w.write(dir + "/" + file));
    }
    if (sharded) {
        nlohmann::ordered_json index;
        index["metadata"] = {{"total_size", total}};
        index["weight_map"] = weight_map;
        DI_RETURN_IF_ERROR(write_text(dir + "/model.safetensors.index.json", index.dump(2) + "\n"));
        std::filesystem::remove(dir + "/model.safetensors", ec);
    } else {
        std::filesystem::remove(dir + "/model.safetensors.index.json", ec);
    }
    return core::Status();
}

} // namespace deepinfer::model::deepseek_v4
