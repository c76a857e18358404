// Random V4.1 checkpoints in the released layout (synthetic.h): the presets' config.json, the tensor plan
// (what model_weights.cpp binds, plus `gate.bias_vl`), and a streaming writer that lays every shard out
// first (header, ftruncate) and then fills tensors chunk by chunk with pwrite, so no tensor is ever held
// whole in memory and a sparse Engram table costs only its seeded rows.

#include "model/deepseek_v41/synthetic.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "model/deepseek_v41/engram_hash.h"
#include "weights/quantize.h"

namespace deepinfer::model::deepseek_v41 {
namespace {

using core::DType;
using nlohmann::ordered_json;

// ---------------------------------------------------------------------------------------------------
// Presets
// ---------------------------------------------------------------------------------------------------

ordered_json quantization_json() {
    return {{"quant_method", "fp8"},
            {"activation_scheme", "dynamic"},
            {"weight_block_size", {32, 32}},
            {"scale_fmt", "ue8m0"},
            {"expert_dtype", "fp4"}};
}

ordered_json tiny_text_v41() {
    ordered_json t;
    t["model_type"] = "deepseek_v41_text";
    t["vocab_size"] = 129280;
    t["hidden_size"] = 64;
    t["moe_intermediate_size"] = 32;
    t["num_hidden_layers"] = 5;
    t["num_attention_heads"] = 4;
    t["num_key_value_heads"] = 1;
    t["head_dim"] = 64;
    t["qk_rope_head_dim"] = 16;
    t["q_lora_rank"] = 32;
    t["o_lora_rank"] = 16;
    t["o_groups"] = 2;
    t["hidden_act"] = "silu";
    t["swiglu_limit"] = 1.0;
    t["rms_norm_eps"] = 1e-6;
    t["attention_bias"] = false;
    t["max_position_embeddings"] = 4096;
    t["rope_theta"] = 10000.0;
    t["rope_scaling"] = {{"rope_type", "yarn"},
                         {"factor", 4.0},
                         {"beta_fast", 32.0},
                         {"beta_slow", 1.0},
                         {"original_max_position_embeddings", 1024}};
    t["n_routed_experts"] = 8;
    t["n_shared_experts"] = 1;
    t["num_experts_per_tok"] = 2;
    t["scoring_func"] = "sqrtsoftplus";
    t["topk_method"] = "noaux_tc";
    t["norm_topk_prob"] = true;
    t["routed_scaling_factor"] = 1.5;
    t["gate_temp"] = 1.0;
    t["sliding_window"] = 8;
    t["compress_ratios"] = {0, 2, 2, 1, 1};
    t["compress_rope_theta"] = 160000.0;
    t["kv_source_layer_ids"] = {1, 3};
    t["index_source_layer_ids"] = {1, 3, 4};
    t["index_n_heads"] = 32;
    t["index_head_dim"] = 32;
    t["index_topk"] = 4;
    t["candidate_source_layer_id"] = 3;
    t["candidate_topk_blocks"] = 3;
    t["candidate_block_size"] = 2;
    t["hc_mult"] = 4;
    t["hc_sinkhorn_iters"] = 20;
    t["hc_eps"] = 1e-6;
    // data/engram/tiny-text-v41 (tools/oracle/make_engram_hash.py): rows = the sums of the primes
    t["engram_layer_ids"] = {1, 3};
    t["engram_num_embeddings"] = {4062, 4152};
    t["engram_max_ngram_size"] = 3;
    t["engram_vocab_size"] = 1000;
    t["engram_n_heads"] = 2;
    t["engram_head_dim"] = 32;
    t["engram_pad_token_id"] = 2;
    t["engram_compressed_vocab_size"] = 99092;
    t["num_nextn_predict_layers"] = 0;
    return t;
}

// V4.1-Flash's per-layer dims (tests/fixtures/deepseek-v41-flash/config.json) with 4 layers (window, ratio-2
// KV + index source, ratio-1 KV + index + candidate source, ratio-1 re-index inside the candidates) and 8
// experts (top-6 as released), and Flash's Engram fields at layers 1 and 3.
ordered_json flash_v41_engram() {
    ordered_json t;
    t["model_type"] = "deepseek_v41_text";
    t["vocab_size"] = 129280;
    t["hidden_size"] = 5120;
    t["moe_intermediate_size"] = 2304;
    t["num_hidden_layers"] = 4;
    t["num_attention_heads"] = 64;
    t["num_key_value_heads"] = 1;
    t["head_dim"] = 512;
    t["qk_rope_head_dim"] = 64;
    t["q_lora_rank"] = 1280;
    t["o_lora_rank"] = 1024;
    t["o_groups"] = 8;
    t["hidden_act"] = "silu";
    t["swiglu_limit"] = 10.0;
    t["rms_norm_eps"] = 1e-20;
    t["attention_bias"] = false;
    t["max_position_embeddings"] = 1048576;
    t["rope_theta"] = 10000;
    t["rope_scaling"] = {{"rope_type", "yarn"},
                         {"factor", 16},
                         {"beta_fast", 32},
                         {"beta_slow", 1},
                         {"original_max_position_embeddings", 65536}};
    t["n_routed_experts"] = 8;
    t["n_shared_experts"] = 1;
    t["num_experts_per_tok"] = 6;
    t["scoring_func"] = "sqrtsoftplus";
    t["topk_method"] = "noaux_tc";
    t["norm_topk_prob"] = true;
    t["routed_scaling_factor"] = 1.5;
    t["sliding_window"] = 128;
    t["compress_ratios"] = {0, 2, 1, 1};
    t["compress_rope_theta"] = 160000;
    t["kv_source_layer_ids"] = {1, 2};
    t["index_source_layer_ids"] = {1, 2, 3};
    t["index_n_heads"] = 32;
    t["index_head_dim"] = 128;
    t["index_topk"] = 512;
    t["candidate_source_layer_id"] = 2;
    t["candidate_topk_blocks"] = 2048;
    t["candidate_block_size"] = 8;
    t["hc_mult"] = 4;
    t["hc_sinkhorn_iters"] = 20;
    t["hc_eps"] = 1e-6;
    // data/engram/flash-v41-engram: the released primes, so the released row counts
    t["engram_layer_ids"] = {1, 3};
    t["engram_num_embeddings"] = {384006168, 384016682};
    t["engram_max_ngram_size"] = 4;
    t["engram_vocab_size"] = 16000000;
    t["engram_n_heads"] = 8;
    t["engram_head_dim"] = 256;
    t["engram_pad_token_id"] = 2;
    t["engram_compressed_vocab_size"] = 99092;
    t["num_nextn_predict_layers"] = 0;
    return t;
}

ordered_json released_vision_config() {
    return {{"model_type", "deepseek_v41_vision"},
            {"num_hidden_layers", 32},
            {"hidden_size", 1024},
            {"num_attention_heads", 16},
            {"intermediate_size", 2816},
            {"patch_size", 14},
            {"rope_theta", 10000},
            {"downsample_ratio", 3},
            {"max_image_tokens", 1024},
            {"min_pixels", 295936},
            {"max_wh_ratio", nullptr}};
}

// ---------------------------------------------------------------------------------------------------
// Tensor plan
// ---------------------------------------------------------------------------------------------------

enum class Store { kF32, kBF16, kFp8, kFp4, kTableFp8, kTableBF16 };

struct Plan {
    std::string name;
    core::Shape shape; // logical [rows, cols] (a vector: [n])
    Store store;
    // value distribution: mean + stddev * z, or uniform [lo, lo + 1) when uniform
    float mean = 0, stddev = 1;
    bool uniform = false;
};

std::vector<Plan> plan_tensors(const ModelConfig& c, bool fp8) {
    std::vector<Plan> out;
    const int64_t D = c.hidden_size, H = c.num_attention_heads, d = c.head_dim, hc = c.hc_mult;
    const int64_t mix = (2 + hc) * hc;
    auto mat = [&](const std::string& name, int64_t rows, int64_t cols, Store st) {
        if (!fp8 && (st == Store::kFp8 || st == Store::kFp4)) st = Store::kBF16;
        out.push_back({name, core::Shape{rows, cols}, st, 0.0f,
                       static_cast<float>(1.0 / std::sqrt(static_cast<double>(cols)))});
    };
    auto vec = [&](const std::string& name, int64_t n, Store st, float mean, float stddev) {
        out.push_back({name, core::Shape{n}, st, mean, stddev});
    };
    auto norm = [&](const std::string& name, int64_t n) { vec(name, n, Store::kBF16, 1.0f, 0.1f); };
    out.push_back({"embed.weight", core::Shape{c.vocab_size, D}, Store::kBF16, 0.0f, 1.0f});
    mat("head.weight", c.vocab_size, D, Store::kBF16);
    norm("norm.weight", D);
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
        const std::string p = "layers." + std::to_string(l) + ".";
        for (const char* site : {"hc_attn", "hc_ffn"}) {
            mat(p + site + "_fn", mix, hc * D, Store::kF32);
            vec(p + site + "_base", mix, Store::kF32, 0.0f, 0.5f);
            out.push_back({p + site + "_scale", core::Shape{3}, Store::kF32, 0.5f, 1.0f, true});
        }
        norm(p + "attn_norm.weight", D);
        norm(p + "ffn_norm.weight", D);
        mat(p + "attn.wq_a.weight", c.q_lora_rank, D, Store::kFp8);
        norm(p + "attn.q_norm.weight", c.q_lora_rank);
        mat(p + "attn.wq_b.weight", H * d, c.q_lora_rank, Store::kFp8);
        mat(p + "attn.wkv.weight", d, D, Store::kFp8);
        norm(p + "attn.kv_norm.weight", d);
        mat(p + "attn.wo_a.weight", c.o_groups * c.o_lora_rank, H * d / c.o_groups, Store::kFp8);
        mat(p + "attn.wo_b.weight", D, c.o_groups * c.o_lora_rank, Store::kFp8);
        vec(p + "attn.attn_sink", H, Store::kF32, 0.0f, 0.5f);
        if (c.is_kv_source(l)) {
            const bool pooled = c.compress_ratios[l] > 1;
            mat(p + "attn.compressor.wkv.weight", d, D, pooled ? Store::kF32 : Store::kBF16);
            if (pooled) mat(p + "attn.compressor.wgate.weight", d, D, Store::kBF16);
            norm(p + "attn.compressor.norm.weight", d);
        }
        if (c.is_index_source(l)) {
            mat(p + "attn.indexer.wq_b.weight", c.index_n_heads * c.index_head_dim, c.q_lora_rank,
                Store::kFp8);
            mat(p + "attn.indexer.weights_proj.weight", c.index_n_heads, D, Store::kBF16);
            if (c.is_kv_source(l)) {
                mat(p + "attn.indexer.wk.weight", c.index_head_dim, d, Store::kBF16);
                norm(p + "attn.indexer.k_norm.weight", c.index_head_dim);
            }
        }
        mat(p + "ffn.gate.weight", c.n_routed_experts, D, Store::kBF16);
        vec(p + "ffn.gate.bias", c.n_routed_experts, Store::kF32, 0.0f, 0.1f);
        vec(p + "ffn.gate.bias_vl", c.n_routed_experts, Store::kF32, 0.0f, 0.1f);
        const int64_t I = c.moe_intermediate_size;
        for (int64_t e = 0; e < c.n_routed_experts; ++e) {
            const std::string ep = p + "ffn.experts." + std::to_string(e) + ".";
            mat(ep + "w1.weight", I, D, Store::kFp4);
            mat(ep + "w2.weight", D, I, Store::kFp4);
            mat(ep + "w3.weight", I, D, Store::kFp4);
        }
        mat(p + "ffn.shared_experts.w1.weight", I, D, Store::kFp8);
        mat(p + "ffn.shared_experts.w2.weight", D, I, Store::kFp8);
        mat(p + "ffn.shared_experts.w3.weight", I, D, Store::kFp8);
        const int64_t ei = c.engram.layer_index(l);
        if (ei >= 0) {
            const int64_t hd = c.engram.head_dim;
            mat(p + "engram.wkv.weight", (hc + 1) * D, c.engram.n_hash_cols() * hd, Store::kFp8);
            vec(p + "engram.q_weight", hc * D, Store::kBF16, 1.0f, 0.1f);
            vec(p + "engram.k_weight", hc * D, Store::kBF16, 1.0f, 0.1f);
            out.push_back({p + "engram.embed.weight", core::Shape{c.engram.num_embeddings[ei], hd},
                           fp8 ? Store::kTableFp8 : Store::kTableBF16, 0.0f, 1.0f});
        }
    }
    return out;
}

// ---------------------------------------------------------------------------------------------------
// Values: a counter-based stream per tensor (value i depends on (seed, name, i) alone), so any chunk of
// any tensor is drawn independently and in parallel.
// ---------------------------------------------------------------------------------------------------

uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

uint64_t tensor_key(uint64_t seed, const std::string& name) {
    uint64_t h = 0xCBF29CE484222325ull; // FNV-1a
    for (unsigned char ch : name) h = (h ^ ch) * 0x100000001B3ull;
    return mix64(seed ^ h);
}

// v[k] for k in [i0, i0 + n): Irwin-Hall of the four 16-bit quarters (mean 0, variance 1), or uniform.
void draw(const Plan& p, uint64_t key, int64_t i0, int64_t n, float* v) {
    constexpr uint64_t kGamma = 0x9E3779B97F4A7C15ull;
    const float scale = p.stddev * 1.7320508f / 65536.0f;
    const float offset = p.mean - p.stddev * 1.7320508f * 2.0f;
    for (int64_t k = 0; k < n; ++k) {
        const uint64_t z = mix64(key + static_cast<uint64_t>(i0 + k + 1) * kGamma);
        if (p.uniform) {
            v[k] = p.mean + static_cast<float>(static_cast<double>(z >> 11) * 0x1.0p-53);
            continue;
        }
        const uint32_t q = static_cast<uint32_t>(z & 0xFFFF) + static_cast<uint32_t>((z >> 16) & 0xFFFF) +
                           static_cast<uint32_t>((z >> 32) & 0xFFFF) + static_cast<uint32_t>(z >> 48);
        v[k] = offset + scale * static_cast<float>(q + 2);
    }
}

// ---------------------------------------------------------------------------------------------------
// Layout and writing
// ---------------------------------------------------------------------------------------------------

constexpr int kBlock = 32;    // fp8 weight blocks 32x32, Engram table scales per 32 columns
constexpr int kFp4Group = 32; // routed experts

struct Stored { // one stored tensor (a weight, or its scale)
    std::string name;
    DType dtype;
    core::Shape shape;
    int64_t bytes = 0;
    int64_t offset = 0; // in the shard's data section
};

struct Item { // one planned tensor and where its stored parts go
    const Plan* plan;
    size_t shard;
    size_t weight, scale = SIZE_MAX; // indices into the shard's stored list
    int64_t fill_rows = 0;           // rows written (the rest of a sparse table is a hole)
};

struct Shard {
    std::string file;
    std::vector<Stored> stored;
    int64_t header_bytes = 0, data_bytes = 0;
    std::string header;
};

int64_t rows_of(const Plan& p) {
    return p.shape.ndim() == 2 ? p.shape[0] : 1;
}
int64_t cols_of(const Plan& p) {
    return p.shape.ndim() == 2 ? p.shape[1] : p.shape[0];
}

void add_stored(Shard& s, Item& it) {
    const Plan& p = *it.plan;
    const int64_t rows = rows_of(p), cols = cols_of(p), n = p.shape.numel();
    auto push = [&](const std::string& name, DType dt, core::Shape shape, int64_t bytes) {
        s.stored.push_back({name, dt, std::move(shape), bytes, 0});
        return s.stored.size() - 1;
    };
    const std::string scale_name = p.name.substr(0, p.name.size() - std::string(".weight").size()) + ".scale";
    switch (p.store) {
    case Store::kF32:
        it.weight = push(p.name, DType::kF32, p.shape, 4 * n);
        break;
    case Store::kBF16:
    case Store::kTableBF16:
        it.weight = push(p.name, DType::kBF16, p.shape, 2 * n);
        break;
    case Store::kFp8: {
        const core::Shape ss{(rows + kBlock - 1) / kBlock, (cols + kBlock - 1) / kBlock};
        it.weight = push(p.name, DType::kF8E4M3, p.shape, n);
        it.scale = push(scale_name, DType::kF8E8M0, ss, ss.numel());
        break;
    }
    case Store::kFp4:
        it.weight = push(p.name, DType::kI8, core::Shape{rows, cols / 2}, n / 2);
        it.scale =
            push(scale_name, DType::kF8E8M0, core::Shape{rows, cols / kFp4Group}, rows * (cols / kFp4Group));
        break;
    case Store::kTableFp8:
        it.weight = push(p.name, DType::kF8E4M3, p.shape, n);
        it.scale = push(scale_name, DType::kF8E8M0, core::Shape{rows, cols / kBlock}, rows * (cols / kBlock));
        break;
    }
}

// Offsets, widest element type first (every tensor aligned to its element size, no gaps), and the header.
void lay_out(Shard& s) {
    std::vector<size_t> order(s.stored.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        return core::dtype_size(s.stored[a].dtype) > core::dtype_size(s.stored[b].dtype);
    });
    ordered_json h = ordered_json::object();
    h["__metadata__"] = {{"format", "pt"}};
    int64_t off = 0;
    for (size_t i : order) {
        Stored& t = s.stored[i];
        t.offset = off;
        h[t.name] = {{"dtype", std::string(core::dtype_name(t.dtype))},
                     {"shape", t.shape.to_vector()},
                     {"data_offsets", {off, off + t.bytes}}};
        off += t.bytes;
    }
    s.data_bytes = off;
    s.header = h.dump();
    while ((s.header.size() + 8) % 8 != 0) s.header.push_back(' ');
    s.header_bytes = 8 + static_cast<int64_t>(s.header.size());
}

core::Status pwrite_all(int fd, const std::string& path, const void* buf, int64_t n, int64_t off) {
    const auto* p = static_cast<const uint8_t*>(buf);
    while (n > 0) {
        const ssize_t w = ::pwrite(fd, p, static_cast<size_t>(std::min<int64_t>(n, 1 << 30)), off);
        if (w < 0) {
            if (errno == EINTR) continue;
            return core::io_error(path + ": write failed: " + std::strerror(errno));
        }
        p += w;
        n -= w;
        off += w;
    }
    return {};
}

// Draws, encodes and writes rows [r0, r0 + nr) of one planned tensor.
core::Status write_rows(int fd, const std::string& path, const Shard& s, const Item& it, uint64_t key,
                        int64_t r0, int64_t nr) {
    const Plan& p = *it.plan;
    const int64_t cols = cols_of(p);
    std::vector<float> v(nr * cols);
    draw(p, key, r0 * cols, nr * cols, v.data());
    const Stored& w = s.stored[it.weight];
    const int64_t base = s.header_bytes + w.offset;
    switch (p.store) {
    case Store::kF32:
        return pwrite_all(fd, path, v.data(), nr * cols * 4, base + r0 * cols * 4);
    case Store::kBF16:
    case Store::kTableBF16: {
        std::vector<uint16_t> b(v.size());
        for (size_t i = 0; i < v.size(); ++i) b[i] = core::f32_to_bf16(v[i]);
        return pwrite_all(fd, path, b.data(), nr * cols * 2, base + r0 * cols * 2);
    }
    case Store::kFp8:
    case Store::kTableFp8: {
        const int br = p.store == Store::kFp8 ? kBlock : 1;
        const int64_t sc_cols = (cols + kBlock - 1) / kBlock;
        std::vector<uint8_t> q(v.size()), sc(((nr + br - 1) / br) * sc_cols);
        weights::quantize_fp8_block(v.data(), nr, cols, br, kBlock, q.data(), sc.data());
        DI_RETURN_IF_ERROR(pwrite_all(fd, path, q.data(), nr * cols, base + r0 * cols));
        const Stored& st = s.stored[it.scale];
        return pwrite_all(fd, path, sc.data(), static_cast<int64_t>(sc.size()),
                          s.header_bytes + st.offset + (r0 / br) * sc_cols);
    }
    case Store::kFp4: {
        std::vector<uint8_t> q(v.size() / 2), sc(nr * (cols / kFp4Group));
        weights::quantize_fp4_group(v.data(), nr, cols, kFp4Group, q.data(), sc.data());
        DI_RETURN_IF_ERROR(pwrite_all(fd, path, q.data(), nr * cols / 2, base + r0 * cols / 2));
        const Stored& st = s.stored[it.scale];
        return pwrite_all(fd, path, sc.data(), static_cast<int64_t>(sc.size()),
                          s.header_bytes + st.offset + r0 * (cols / kFp4Group));
    }
    }
    return {};
}

core::Status write_text(const std::string& path, const std::string& text) {
    std::ofstream f(path, std::ios::binary);
    if (!f) return core::io_error(path + ": cannot open for writing");
    f << text;
    if (!f.flush()) return core::io_error(path + ": write failed");
    return {};
}

core::Status copy_file(const std::string& from, const std::string& to) {
    std::error_code ec;
    std::filesystem::copy_file(from, to, std::filesystem::copy_options::overwrite_existing, ec);
    if (ec) return core::io_error("copy " + from + " -> " + to + ": " + ec.message());
    return {};
}

} // namespace

std::vector<std::string> synthetic_preset_names() {
    return {"tiny-text-v41", "flash-v41-engram"};
}

core::Result<std::string> synthetic_preset_json(const std::string& name, bool fp8) {
    ordered_json root;
    root["architectures"] = {"DeepseekV41ForCausalLM"};
    root["model_type"] = "deepseek_v41";
    root["dtype"] = "bfloat16";
    root["bos_token_id"] = 0;
    root["eos_token_id"] = 1;
    root["pad_token_id"] = 2;
    root["image_token_id"] = 129264;
    root["tie_word_embeddings"] = false;
    if (fp8) root["quantization_config"] = quantization_json();
    if (name == "tiny-text-v41")
        root["text_config"] = tiny_text_v41();
    else if (name == "flash-v41-engram")
        root["text_config"] = flash_v41_engram();
    else
        return core::invalid_argument("unknown V4.1 preset '" + name + "'");
    root["vision_config"] = released_vision_config();
    return root.dump(2) + "\n";
}

std::string synthetic_preset_hash_data(const std::string& name) {
    return "engram/" + name + "/engram_hash.safetensors";
}

core::Status write_synthetic_checkpoint(const std::string& config_json, const SyntheticOptions& o,
                                        const std::string& hash_data_path, const std::string& tokenizer_path,
                                        const std::string& dir) {
    DI_ASSIGN_OR_RETURN(ModelConfig c, ModelConfig::from_json_string(config_json, "synthetic config.json"));
    const bool fp8 = c.quant.fp8;
    if (fp8 && (c.quant.block_rows != kBlock || c.quant.block_cols != kBlock || !c.expert_fp4))
        return core::invalid_argument("synthetic config.json: the V4.1 writer stores fp8 as released "
                                      "(weight_block_size [32, 32], expert_dtype fp4)");
    if (fp8 && (c.hidden_size % kFp4Group != 0 || c.moe_intermediate_size % kFp4Group != 0))
        return core::invalid_argument("synthetic config.json: FP4 experts need hidden_size and "
                                      "moe_intermediate_size to be multiples of 32");
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return core::io_error(dir + ": cannot create directory: " + ec.message());
    DI_RETURN_IF_ERROR(write_text(dir + "/config.json", config_json));
    DI_RETURN_IF_ERROR(copy_file(hash_data_path, dir + "/engram_hash.safetensors"));
    if (!tokenizer_path.empty()) DI_RETURN_IF_ERROR(copy_file(tokenizer_path, dir + "/tokenizer.json"));

    const std::vector<Plan> plans = plan_tensors(c, fp8);
    // Shard 0: every dense tensor; one shard per sparse Engram table.
    std::vector<Shard> shards(1);
    std::vector<Item> items;
    for (const Plan& p : plans) {
        Item it{&p, 0, 0};
        const bool table = p.store == Store::kTableFp8 || p.store == Store::kTableBF16;
        it.fill_rows = rows_of(p);
        if (table && rows_of(p) > o.engram_dense_rows) {
            shards.emplace_back();
            it.shard = shards.size() - 1;
            it.fill_rows = std::min(rows_of(p), o.engram_seeded_rows);
        }
        add_stored(shards[it.shard], it);
        items.push_back(it);
    }
    const bool sharded = shards.size() > 1;
    for (size_t i = 0; i < shards.size(); ++i) {
        char buf[64];
        std::snprintf(buf, sizeof(buf), "model-%05zu-of-%05zu.safetensors", i + 1, shards.size());
        shards[i].file = sharded ? buf : "model.safetensors";
        lay_out(shards[i]);
    }
    std::vector<int> fds(shards.size(), -1);
    auto close_all = [&] {
        for (int fd : fds)
            if (fd >= 0) ::close(fd);
    };
    for (size_t i = 0; i < shards.size(); ++i) {
        const std::string path = dir + "/" + shards[i].file;
        fds[i] = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fds[i] < 0) {
            close_all();
            return core::io_error(path + ": cannot open for writing: " + std::strerror(errno));
        }
        const uint64_t n = shards[i].header.size();
        uint8_t len[8];
        for (int b = 0; b < 8; ++b) len[b] = static_cast<uint8_t>(n >> (8 * b));
        core::Status st = pwrite_all(fds[i], path, len, 8, 0);
        if (st.ok()) st = pwrite_all(fds[i], path, shards[i].header.data(), static_cast<int64_t>(n), 8);
        if (st.ok() && ::ftruncate(fds[i], shards[i].header_bytes + shards[i].data_bytes) != 0)
            st = core::io_error(path + ": ftruncate failed: " + std::strerror(errno));
        if (!st.ok()) {
            close_all();
            return st;
        }
    }
    // Work units: row chunks of ~2M values (a multiple of the fp8 block rows), drawn in parallel.
    struct Unit {
        size_t item;
        int64_t r0, nr;
    };
    std::vector<Unit> units;
    for (size_t i = 0; i < items.size(); ++i) {
        const int64_t cols = cols_of(*items[i].plan);
        int64_t chunk = std::max<int64_t>(kBlock, ((int64_t{2} << 20) / cols) / kBlock * kBlock);
        for (int64_t r = 0; r < items[i].fill_rows; r += chunk)
            units.push_back({i, r, std::min(chunk, items[i].fill_rows - r)});
    }
    // The rows the fill prompts' hash ids address, in the sparse tables.
    if (!o.engram_fill_prompts.empty() && c.engram.enabled()) {
        auto hasher = EngramHasher::load(hash_data_path, c);
        if (!hasher.ok()) {
            close_all();
            return hasher.status();
        }
        const int64_t E = static_cast<int64_t>(c.engram.layer_ids.size()), cols = c.engram.n_hash_cols();
        std::vector<std::vector<int64_t>> rows(E);
        std::vector<int64_t> ids;
        for (const auto& prompt : o.engram_fill_prompts) {
            for (int64_t t : prompt)
                if (t < 0 || t >= c.vocab_size) {
                    close_all();
                    return core::invalid_argument("engram fill prompt: token id " + std::to_string(t) +
                                                  " is outside the vocabulary");
                }
            NgramHistory history;
            ids.clear();
            hasher->hash(prompt, {}, history, ids);
            for (size_t k = 0; k < ids.size(); ++k) rows[(k / cols) % E].push_back(ids[k]);
        }
        for (size_t i = 0; i < items.size(); ++i) {
            const Plan& p = *items[i].plan;
            if ((p.store != Store::kTableFp8 && p.store != Store::kTableBF16) || items[i].shard == 0)
                continue;
            const int64_t e = c.engram.layer_index(std::stoll(p.name.substr(7)));
            std::sort(rows[e].begin(), rows[e].end());
            rows[e].erase(std::unique(rows[e].begin(), rows[e].end()), rows[e].end());
            for (int64_t r : rows[e])
                if (r >= items[i].fill_rows) units.push_back({i, r, 1});
        }
    }
    std::vector<core::Status> errors(units.size());
    core::ThreadPool::global().parallel_for(static_cast<int64_t>(units.size()), [&](int64_t lo, int64_t hi) {
        for (int64_t k = lo; k < hi; ++k) {
            const Item& it = items[units[k].item];
            const Shard& s = shards[it.shard];
            errors[k] = write_rows(fds[it.shard], dir + "/" + s.file, s, it,
                                   tensor_key(o.seed, it.plan->name), units[k].r0, units[k].nr);
        }
    });
    close_all();
    for (const core::Status& st : errors) DI_RETURN_IF_ERROR(st);

    if (sharded) {
        ordered_json index;
        int64_t total = 0;
        ordered_json map = ordered_json::object();
        for (const Shard& s : shards) {
            total += s.data_bytes;
            for (const Stored& t : s.stored) map[t.name] = s.file;
        }
        index["metadata"] = {{"total_size", total}};
        index["weight_map"] = map;
        DI_RETURN_IF_ERROR(write_text(dir + "/model.safetensors.index.json", index.dump(2) + "\n"));
        std::filesystem::remove(dir + "/model.safetensors", ec);
    } else {
        std::filesystem::remove(dir + "/model.safetensors.index.json", ec);
    }
    return {};
}

} // namespace deepinfer::model::deepseek_v41
