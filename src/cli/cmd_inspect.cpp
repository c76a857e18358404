// `deepinfer inspect MODEL_DIR`: config summary, tensor census, and a check of every required tensor.
// Exit 0 when the checkpoint fits its config, 1 when tensors are missing or wrong, 2 on usage or load errors.
// DeepSeek V4 and V4.1 (the family from config.json; V4.1 also checks the Engram tables and hash data).

#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "cli/args.h"
#include "cli/command.h"
#include "model/deepseek_v4/config.h"
#include "model/deepseek_v41/config.h"
#include "model/deepseek_v41/engram_hash.h"
#include "model/deepseek_v41/model_weights.h"
#include "model/sha256.h"
#include "weights/checkpoint.h"

namespace deepinfer::cli {
namespace {

namespace v4 = model::deepseek_v4;

const char* attention_name(v4::AttentionType t) {
    switch (t) {
    case v4::AttentionType::kSliding:
        return "sliding";
    case v4::AttentionType::kCompressedSparse:
        return "CSA";
    case v4::AttentionType::kHeavilyCompressed:
        return "HCA";
    }
    return "?";
}

void print_config(const v4::ModelConfig& c) {
    std::printf("model: vocab %lld, hidden %lld, %lld layers, %lld heads x %lld (rope %lld), q_lora %lld, "
                "o %lld groups x %lld, window %lld, hc %lld streams\n",
                (long long)c.vocab_size, (long long)c.hidden_size, (long long)c.num_hidden_layers,
                (long long)c.num_attention_heads, (long long)c.head_dim, (long long)c.qk_rope_head_dim,
                (long long)c.q_lora_rank, (long long)c.o_groups, (long long)c.o_lora_rank,
                (long long)c.sliding_window, (long long)c.hc_mult);
    std::printf("layers:");
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
        std::printf(" %lld:%s", (long long)i, attention_name(c.layer_types[i]));
        if (c.compress_ratios[i] > 0) std::printf("/%lld", (long long)c.compress_ratios[i]);
        if (c.mlp_layer_types[i] == v4::MlpType::kHashMoe) std::printf("+hash");
    }
    std::printf("\n");
    std::printf(
        "moe: %lld routed experts, top-%lld, %lld shared, intermediate %lld, scale %g, swiglu limit %g\n",
        (long long)c.n_routed_experts, (long long)c.num_experts_per_tok, (long long)c.n_shared_experts,
        (long long)c.moe_intermediate_size, c.routed_scaling_factor, c.swiglu_limit);
    std::printf("indexer: %lld heads x %lld, top-%lld; rope theta %g / compress %g",
                (long long)c.index_n_heads, (long long)c.index_head_dim, (long long)c.index_topk,
                c.rope_theta, c.compress_rope_theta);
    if (c.yarn.enabled)
        std::printf(", yarn factor %g over %lld", c.yarn.factor,
                    (long long)c.yarn.original_max_position_embeddings);
    std::printf("; mtp layers %lld\n", (long long)c.num_nextn_predict_layers);
    if (c.quant.fp8)
        std::printf("quantization: fp8 e4m3 blocks %dx%d (e8m0 scales), fp4 group %d\n", c.quant.block_rows,
                    c.quant.block_cols, c.quant.fp4_group);
    else
        std::printf("quantization: none\n");
}

void print_census(const weights::Checkpoint& ck) {
    std::map<std::string, std::pair<size_t, size_t>> by_dtype; // name -> (tensors, bytes)
    std::map<std::string, int> files;
    for (const auto& t : ck.tensors()) {
        auto& e = by_dtype[std::string(core::dtype_name(t.dtype))];
        e.first += 1;
        e.second += t.nbytes;
        files[t.file] += 1;
    }
    std::printf("checkpoint: %zu tensors in %zu file(s), %zu bytes mapped\n", ck.tensors().size(),
                files.size(), ck.mapped_bytes());
    for (const auto& [name, e] : by_dtype)
        std::printf("  %-8s %6zu tensors %14zu bytes\n", name.c_str(), e.first, e.second);
}

namespace v41 = model::deepseek_v41;

void print_v41_config(const v41::ModelConfig& c) {
    std::printf("model: DeepSeek V4.1, vocab %lld, hidden %lld, %lld layers, %lld heads x %lld (rope %lld), "
                "q_lora %lld, o %lld groups x %lld, window %lld, hc %lld streams\n",
                (long long)c.vocab_size, (long long)c.hidden_size, (long long)c.num_hidden_layers,
                (long long)c.num_attention_heads, (long long)c.head_dim, (long long)c.qk_rope_head_dim,
                (long long)c.q_lora_rank, (long long)c.o_groups, (long long)c.o_lora_rank,
                (long long)c.sliding_window, (long long)c.hc_mult);
    std::printf("layers:");
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
        std::printf(" %lld:r%lld", (long long)i, (long long)c.compress_ratios[i]);
        if (c.is_kv_source(i)) std::printf("+kv");
        if (c.is_index_source(i)) std::printf("+index");
        if (i == c.candidate_source_layer_id) std::printf("+candidates");
        if (c.engram.layer_index(i) >= 0) std::printf("+engram");
    }
    std::printf("\n");
    std::printf("moe: %lld routed experts, top-%lld, %lld shared, intermediate %lld, gate_temp %g\n",
                (long long)c.n_routed_experts, (long long)c.num_experts_per_tok,
                (long long)c.n_shared_experts, (long long)c.moe_intermediate_size, c.gate_temp);
    std::printf("indexer: %lld heads x %lld, top-%lld; candidates %lld blocks of %lld\n",
                (long long)c.index_n_heads, (long long)c.index_head_dim, (long long)c.index_topk,
                (long long)c.candidate_topk_blocks, (long long)c.candidate_block_size);
    std::printf("engram: layers");
    for (int64_t l : c.engram.layer_ids) std::printf(" %lld", (long long)l);
    std::printf(", %lld-grams x %lld heads, head_dim %lld, compressed vocab %lld\n",
                (long long)c.engram.max_ngram_size, (long long)c.engram.n_heads, (long long)c.engram.head_dim,
                (long long)c.engram.compressed_vocab_size);
    if (c.vision.present)
        std::printf(
            "vision_config: %lld ViT layers, hidden %lld, patch %lld (ignored: images not supported)\n",
            (long long)c.vision.num_hidden_layers, (long long)c.vision.hidden_size,
            (long long)c.vision.patch_size);
    if (c.quant.fp8)
        std::printf("quantization: fp8 e4m3 blocks %dx%d (e8m0 scales), experts %s\n", c.quant.block_rows,
                    c.quant.block_cols, c.expert_fp4 ? "fp4" : "fp8");
    else
        std::printf("quantization: none\n");
}

// Bytes of `path` actually allocated on disk (a sparse table allocates only the rows written).
long long allocated_bytes(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return -1;
    return static_cast<long long>(st.st_blocks) * 512;
}

int inspect_v41(const std::string& dir, const std::string& json_text) {
    auto config = v41::ModelConfig::from_json_string(json_text, dir + "/config.json");
    if (!config.ok()) {
        std::fprintf(stderr, "deepinfer inspect: %s\n", config.status().to_string().c_str());
        return 2;
    }
    print_v41_config(*config);
    auto ck = weights::Checkpoint::open(dir, weights::Placement::kMmap); // inspection reads in place
    if (!ck.ok()) {
        std::fprintf(stderr, "deepinfer inspect: %s\n", ck.status().to_string().c_str());
        return 2;
    }
    print_census(**ck);
    int problems = 0;
    // Every tensor the model binds: presence, dtype, shape (the first problem, named).
    auto w = v41::ModelWeights::bind(**ck, *config);
    if (!w.ok()) {
        std::printf("  PROBLEM %s\n", w.status().to_string().c_str());
        ++problems;
    }
    const v41::EngramConfig& e = config->engram;
    for (size_t i = 0; i < e.layer_ids.size(); ++i) {
        const std::string base = "layers." + std::to_string(e.layer_ids[i]) + ".engram.embed";
        const weights::TensorInfo* t = (*ck)->find(base + ".weight");
        const weights::TensorInfo* s = (*ck)->find(base + ".scale");
        if (t == nullptr) continue; // reported by bind
        const size_t bytes = t->nbytes + (s ? s->nbytes : 0);
        std::printf("engram table layer %lld: %lld rows x %lld %s%s, %zu bytes (%s",
                    (long long)e.layer_ids[i], (long long)t->shape[0],
                    (long long)(t->shape.ndim() > 1 ? t->shape[1] : 0),
                    std::string(core::dtype_name(t->dtype)).c_str(), s ? " + F8_E8M0 scales" : "", bytes,
                    t->file.c_str());
        const long long alloc = allocated_bytes(dir + "/" + t->file);
        if (alloc >= 0) std::printf(": %lld bytes of the file allocated on disk", alloc);
        std::printf(")\n");
    }
    if (config->engram.enabled()) {
        const std::string hash_path = dir + "/engram_hash.safetensors";
        std::string tokenizer_sha;
        std::error_code ec;
        if (std::filesystem::exists(dir + "/tokenizer.json", ec)) {
            auto sha = model::sha256_file_hex(dir + "/tokenizer.json");
            if (sha.ok()) tokenizer_sha = *sha;
        }
        auto h = v41::EngramHasher::load(hash_path, *config, tokenizer_sha);
        if (!h.ok()) {
            std::printf("  PROBLEM %s\n", h.status().to_string().c_str());
            ++problems;
        } else {
            std::printf("engram hash data: %s (%lld ids per position per layer%s)\n", hash_path.c_str(),
                        (long long)h->num_cols(), tokenizer_sha.empty() ? "" : ", matches tokenizer.json");
        }
    }
    std::printf("%s\n", problems == 0 ? "OK" : "FAILED");
    return problems == 0 ? 0 : 1;
}

int run_inspect(const std::vector<std::string>& argv) {
    auto args = Args::parse(argv, {}, {"help", "all"});
    if (!args.ok() || args->has("help") || args->positional().size() != 1) {
        if (!args.ok()) std::fprintf(stderr, "deepinfer inspect: %s\n", args.status().message().c_str());
        std::fprintf(
            args.ok() && args->has("help") ? stdout : stderr,
            "usage: deepinfer inspect MODEL_DIR [--all]\n"
            "  Prints the config summary and tensor census of a DeepSeek V4 / V4.1 checkpoint and checks\n"
            "  every required tensor's presence, dtype and shape (V4.1: also the Engram tables' sizes and "
            "the\n"
            "  hash data). --all lists every unexpected tensor.\n");
        return args.ok() && args->has("help") ? 0 : 2;
    }
    const std::string dir = args->positional()[0];
    {
        std::ifstream f(dir + "/config.json");
        std::stringstream ss;
        ss << f.rdbuf();
        if (f && v41::is_deepseek_v41_config(ss.str())) return inspect_v41(dir, ss.str());
    }
    auto config = v4::ModelConfig::from_json_file(dir + "/config.json");
    if (!config.ok()) {
        std::fprintf(stderr, "deepinfer inspect: %s\n", config.status().to_string().c_str());
        return 2;
    }
    print_config(*config);
    auto ck = weights::Checkpoint::open(dir, weights::Placement::kMmap); // inspection reads in place
    if (!ck.ok()) {
        std::fprintf(stderr, "deepinfer inspect: %s\n", ck.status().to_string().c_str());
        return 2;
    }
    print_census(**ck);
    const v4::CheckpointCheck check = v4::check_checkpoint(**ck, *config);
    std::printf("required tensors: %zu checked, %zu problem(s)\n", check.required, check.problems.size());
    for (const auto& p : check.problems) std::printf("  PROBLEM %s\n", p.c_str());
    if (!check.unexpected.empty()) {
        std::printf("unexpected tensors (not used by the model; not an error): %zu\n",
                    check.unexpected.size());
        const size_t shown =
            args->has("all") ? check.unexpected.size() : std::min<size_t>(check.unexpected.size(), 10);
        for (size_t i = 0; i < shown; ++i) std::printf("  %s\n", check.unexpected[i].c_str());
        if (shown < check.unexpected.size())
            std::printf("  ... %zu more (--all)\n", check.unexpected.size() - shown);
    }
    std::printf("%s\n", check.ok() ? "OK" : "FAILED");
    return check.ok() ? 0 : 1;
}

} // namespace

DI_REGISTER_COMMAND("inspect", "check a checkpoint against its config: layer map, dtypes, tensor shapes",
                    run_inspect);

} // namespace deepinfer::cli
