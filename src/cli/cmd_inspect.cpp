// `deepinfer inspect MODEL_DIR`: config summary, tensor census, and a check of every required tensor.
// Exit 0 when the checkpoint fits its config, 1 when tensors are missing or wrong, 2 on usage or load errors.

#include <cstdio>
#include <map>
#include <string>

#include "cli/args.h"
#include "cli/command.h"
#include "model/deepseek_v4/config.h"
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

int run_inspect(const std::vector<std::string>& argv) {
    auto args = Args::parse(argv, {}, {"help", "all"});
    if (!args.ok() || args->has("help") || args->positional().size() != 1) {
        if (!args.ok()) std::fprintf(stderr, "deepinfer inspect: %s\n", args.status().message().c_str());
        std::fprintf(
            args.ok() && args->has("help") ? stdout : stderr,
            "usage: deepinfer inspect MODEL_DIR [--all]\n"
            "  Prints the config summary and tensor census of a DeepSeek V4 checkpoint and checks\n"
            "  every required tensor's presence, dtype and shape. --all lists every unexpected tensor.\n");
        return args.ok() && args->has("help") ? 0 : 2;
    }
    const std::string dir = args->positional()[0];
    auto config = v4::ModelConfig::from_json_file(dir + "/config.json");
    if (!config.ok()) {
        std::fprintf(stderr, "deepinfer inspect: %s\n", config.status().to_string().c_str());
        return 2;
    }
    print_config(*config);
    auto ck = weights::Checkpoint::open(dir);
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
