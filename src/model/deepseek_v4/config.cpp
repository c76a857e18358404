#include "model/deepseek_v4/config.h"

#include <cmath>
#include <fstream>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <sstream>

#include "model/config_fields.h"

namespace deepinfer::model::deepseek_v4 {
namespace {

using nlohmann::json;

using Fields = model::ConfigFields;

constexpr const char* kSliding = "sliding_attention";
constexpr const char* kCsa = "compressed_sparse_attention";
constexpr const char* kHca = "heavily_compressed_attention";

core::Status parse_layer_types(const Fields& f, ModelConfig& c) {
    const int64_t n = c.num_hidden_layers;
    if (const json* lt = f.find({"layer_types"})) {
        if (!lt->is_array()) return f.error("layer_types", "must be a list of strings");
        int64_t csa_rate = 4, hca_rate = 128;
        DI_RETURN_IF_ERROR(f.get_int({"compress_rate_csa"}, &csa_rate, false));
        DI_RETURN_IF_ERROR(f.get_int({"compress_rate_hca"}, &hca_rate, false));
        if (const json* rates = f.find({"compress_rates"})) {
            if (!rates->is_object()) return f.error("compress_rates", "must be an object");
            Fields rf(*rates, f.source(), "compress_rates.");
            DI_RETURN_IF_ERROR(rf.get_int({kCsa}, &csa_rate, false));
            DI_RETURN_IF_ERROR(rf.get_int({kHca}, &hca_rate, false));
        }
        for (size_t i = 0; i < lt->size(); ++i) {
            const json& t = (*lt)[i];
            const std::string field = "layer_types[" + std::to_string(i) + "]";
            if (!t.is_string()) return f.error(field, "must be a string");
            const std::string s = t.get<std::string>();
            if (s == kSliding) {
                c.layer_types.push_back(AttentionType::kSliding);
                c.compress_ratios.push_back(0);
            } else if (s == kCsa) {
                c.layer_types.push_back(AttentionType::kCompressedSparse);
                c.compress_ratios.push_back(csa_rate);
            } else if (s == kHca) {
                c.layer_types.push_back(AttentionType::kHeavilyCompressed);
                c.compress_ratios.push_back(hca_rate);
            } else {
                return f.error(field, "has unknown layer type '" + s + "'");
            }
        }
        return {};
    }
    const json* cr = f.find({"compress_ratios"});
    if (cr == nullptr) return f.error("compress_ratios", "is missing (or give layer_types)");
    if (!cr->is_array()) return f.error("compress_ratios", "must be a list of integers");
    // Official lists carry trailing entries for the MTP layers: keep the first num_hidden_layers.
    if (static_cast<int64_t>(cr->size()) < n)
        return f.error("compress_ratios", "has " + std::to_string(cr->size()) +
                                              " entries, num_hidden_layers is " + std::to_string(n));
    for (int64_t i = 0; i < n; ++i) {
        const json& v = (*cr)[i];
        const std::string field = "compress_ratios[" + std::to_string(i) + "]";
        if (!v.is_number_integer()) return f.error(field, "must be an integer");
        const int64_t m = v.get<int64_t>();
        if (m < 0) return f.error(field, "must be >= 0, got " + std::to_string(m));
        c.compress_ratios.push_back(m);
        c.layer_types.push_back(m == 0   ? AttentionType::kSliding
                                : m == 4 ? AttentionType::kCompressedSparse
                                         : AttentionType::kHeavilyCompressed);
    }
    return {};
}

core::Status parse_mlp_types(const Fields& f, ModelConfig& c) {
    if (const json* mt = f.find({"mlp_layer_types"})) {
        if (!mt->is_array()) return f.error("mlp_layer_types", "must be a list of strings");
        for (size_t i = 0; i < mt->size(); ++i) {
            const json& t = (*mt)[i];
            const std::string field = "mlp_layer_types[" + std::to_string(i) + "]";
            if (!t.is_string()) return f.error(field, "must be a string");
            const std::string s = t.get<std::string>();
            if (s == "hash_moe")
                c.mlp_layer_types.push_back(MlpType::kHashMoe);
            else if (s == "moe")
                c.mlp_layer_types.push_back(MlpType::kMoe);
            else
                return f.error(field, "has unknown MLP type '" + s + "'");
        }
        return {};
    }
    int64_t hash_layers = 3; // transformers' default
    DI_RETURN_IF_ERROR(f.get_int({"num_hash_layers", "n_hash_layers"}, &hash_layers, false));
    if (hash_layers < 0 || hash_layers > c.num_hidden_layers)
        return f.error("num_hash_layers",
                       "must be in [0, num_hidden_layers], got " + std::to_string(hash_layers));
    for (int64_t i = 0; i < c.num_hidden_layers; ++i)
        c.mlp_layer_types.push_back(i < hash_layers ? MlpType::kHashMoe : MlpType::kMoe);
    return {};
}

// A YaRN parameter block ({type|rope_type, factor, original_max_position_embeddings, beta_fast, beta_slow});
// anything but yarn leaves YaRN off.
core::Status parse_yarn(const Fields& f, YarnConfig& y) {
    std::string used;
    const json* type = f.find({"rope_type", "type"}, &used);
    if (type == nullptr) return {};
    if (!type->is_string()) return f.error(used, "must be a string");
    if (type->get<std::string>() != "yarn") return {};
    y.enabled = true;
    DI_RETURN_IF_ERROR(f.get_double({"factor"}, &y.factor, true));
    DI_RETURN_IF_ERROR(
        f.get_int({"original_max_position_embeddings"}, &y.original_max_position_embeddings, true));
    DI_RETURN_IF_ERROR(f.get_double({"beta_fast"}, &y.beta_fast, false));
    DI_RETURN_IF_ERROR(f.get_double({"beta_slow"}, &y.beta_slow, false));
    return {};
}

// rope_theta, compress_rope_theta, YaRN (compress table only) and the rope head dim, from any naming.
core::Status parse_rope(const Fields& f, ModelConfig& c) {
    DI_RETURN_IF_ERROR(f.get_double({"rope_theta"}, &c.rope_theta, false));
    DI_RETURN_IF_ERROR(f.get_double({"compress_rope_theta"}, &c.compress_rope_theta, false));
    double partial = 0.0;
    DI_RETURN_IF_ERROR(f.get_double({"partial_rotary_factor"}, &partial, false));
    if (const json* rs = f.find({"rope_scaling"})) { // official
        if (!rs->is_object()) return f.error("rope_scaling", "must be an object");
        DI_RETURN_IF_ERROR(parse_yarn(Fields(*rs, f.source(), "rope_scaling."), c.yarn));
    }
    if (f.has({"rope_factor"})) { // inference-side short names
        c.yarn.enabled = true;
        DI_RETURN_IF_ERROR(f.get_double({"rope_factor"}, &c.yarn.factor, true));
        DI_RETURN_IF_ERROR(f.get_int({"original_seq_len"}, &c.yarn.original_max_position_embeddings, true));
        DI_RETURN_IF_ERROR(f.get_double({"beta_fast"}, &c.yarn.beta_fast, false));
        DI_RETURN_IF_ERROR(f.get_double({"beta_slow"}, &c.yarn.beta_slow, false));
    }
    if (const json* rp = f.find({"rope_parameters"})) { // transformers: {main, compress} or flat
        if (!rp->is_object()) return f.error("rope_parameters", "must be an object");
        if (rp->contains("main") || rp->contains("compress")) {
            for (const char* part : {"main", "compress"}) {
                auto it = rp->find(part);
                if (it == rp->end()) continue;
                const std::string prefix = std::string("rope_parameters.") + part + ".";
                if (!it->is_object())
                    return f.error(prefix.substr(0, prefix.size() - 1), "must be an object");
                Fields pf(*it, f.source(), prefix);
                const bool main = std::string(part) == "main";
                DI_RETURN_IF_ERROR(
                    pf.get_double({"rope_theta"}, main ? &c.rope_theta : &c.compress_rope_theta, false));
                DI_RETURN_IF_ERROR(pf.get_double({"partial_rotary_factor"}, &partial, false));
                if (!main) DI_RETURN_IF_ERROR(parse_yarn(pf, c.yarn));
            }
        } else {
            Fields pf(*rp, f.source(), "rope_parameters.");
            DI_RETURN_IF_ERROR(parse_yarn(pf, c.yarn));
            DI_RETURN_IF_ERROR(pf.get_double({"partial_rotary_factor"}, &partial, false));
        }
    }
    if (f.has({"qk_rope_head_dim", "rope_head_dim"})) {
        DI_RETURN_IF_ERROR(f.get_int({"qk_rope_head_dim", "rope_head_dim"}, &c.qk_rope_head_dim, true));
    } else if (partial > 0.0) {
        const double rd = partial * static_cast<double>(c.head_dim);
        c.qk_rope_head_dim = static_cast<int64_t>(rd + 0.5);
        if (std::abs(rd - static_cast<double>(c.qk_rope_head_dim)) > 1e-6)
            return f.error("partial_rotary_factor", "times head_dim is not an integer");
    } else {
        return f.error("qk_rope_head_dim", "is missing (or give partial_rotary_factor)");
    }
    return {};
}

core::Status parse_quant(const Fields& f, ModelConfig& c) {
    if (const json* dt = f.find({"dtype"}); dt && dt->is_string() && dt->get<std::string>() == "fp8")
        c.quant.fp8 = true;
    const json* qc = f.find({"quantization_config"});
    if (qc == nullptr) return {};
    if (!qc->is_object()) return f.error("quantization_config", "must be an object");
    Fields q(*qc, f.source(), "quantization_config.");
    if (const json* m = q.find({"quant_method"})) {
        if (!m->is_string()) return q.error("quant_method", "must be a string");
        if (m->get<std::string>() != "fp8")
            return q.error("quant_method", "'" + m->get<std::string>() + "' is not supported (fp8)");
    }
    c.quant.fp8 = true;
    if (const json* bs = q.find({"weight_block_size"})) {
        if (!bs->is_array() || bs->size() != 2 || !(*bs)[0].is_number_integer() ||
            !(*bs)[1].is_number_integer())
            return q.error("weight_block_size", "must be a list of two integers");
        c.quant.block_rows = (*bs)[0].get<int>();
        c.quant.block_cols = (*bs)[1].get<int>();
    }
    int64_t group = c.quant.fp4_group;
    DI_RETURN_IF_ERROR(q.get_int({"fp4_group_size"}, &group, false));
    c.quant.fp4_group = static_cast<int>(group);
    return {};
}

core::Status parse(const json& root, const std::string& src, ModelConfig& c) {
    if (!root.is_object()) return core::invalid_argument(src + ": not a JSON object");
    // HF nests the text model of multimodal configs; V4 is text-only but accept the wrapper.
    const json& obj =
        root.contains("text_config") && root["text_config"].is_object() ? root["text_config"] : root;
    Fields f(obj, src);
    DI_RETURN_IF_ERROR(f.get_int({"vocab_size"}, &c.vocab_size, true));
    DI_RETURN_IF_ERROR(f.get_int({"hidden_size", "dim"}, &c.hidden_size, true));
    DI_RETURN_IF_ERROR(f.get_int({"num_hidden_layers", "n_layers"}, &c.num_hidden_layers, true));
    DI_RETURN_IF_ERROR(f.get_int({"num_attention_heads", "n_heads"}, &c.num_attention_heads, true));
    DI_RETURN_IF_ERROR(f.get_int({"num_key_value_heads"}, &c.num_key_value_heads, false));
    DI_RETURN_IF_ERROR(f.get_int({"head_dim"}, &c.head_dim, true));
    DI_RETURN_IF_ERROR(f.get_int({"q_lora_rank"}, &c.q_lora_rank, true));
    DI_RETURN_IF_ERROR(f.get_int({"o_groups"}, &c.o_groups, true));
    DI_RETURN_IF_ERROR(f.get_int({"o_lora_rank"}, &c.o_lora_rank, true));
    DI_RETURN_IF_ERROR(f.get_int({"moe_intermediate_size", "moe_inter_dim", "intermediate_size"},
                                 &c.moe_intermediate_size, true));
    DI_RETURN_IF_ERROR(f.get_int({"n_routed_experts", "num_local_experts"}, &c.n_routed_experts, true));
    DI_RETURN_IF_ERROR(
        f.get_int({"num_experts_per_tok", "n_activated_experts"}, &c.num_experts_per_tok, true));
    DI_RETURN_IF_ERROR(f.get_int({"n_shared_experts"}, &c.n_shared_experts, false));
    DI_RETURN_IF_ERROR(
        f.get_double({"routed_scaling_factor", "route_scale"}, &c.routed_scaling_factor, false));
    DI_RETURN_IF_ERROR(f.get_double({"swiglu_limit"}, &c.swiglu_limit, false));
    DI_RETURN_IF_ERROR(f.get_int({"sliding_window", "window_size"}, &c.sliding_window, true));
    if (const json* sf = f.find({"scoring_func", "score_func"})) {
        if (!sf->is_string() || sf->get<std::string>() != "sqrtsoftplus")
            return f.error("scoring_func", "must be \"sqrtsoftplus\", got " + sf->dump());
    }
    DI_RETURN_IF_ERROR(parse_layer_types(f, c));
    DI_RETURN_IF_ERROR(parse_mlp_types(f, c));
    DI_RETURN_IF_ERROR(parse_rope(f, c));
    c.max_position_embeddings = 1048576; // transformers' default
    DI_RETURN_IF_ERROR(
        f.get_int({"max_position_embeddings", "max_seq_len"}, &c.max_position_embeddings, false));
    bool has_csa = false;
    for (AttentionType t : c.layer_types) has_csa = has_csa || t == AttentionType::kCompressedSparse;
    DI_RETURN_IF_ERROR(f.get_int({"index_n_heads"}, &c.index_n_heads, has_csa));
    DI_RETURN_IF_ERROR(f.get_int({"index_head_dim"}, &c.index_head_dim, has_csa));
    DI_RETURN_IF_ERROR(f.get_int({"index_topk"}, &c.index_topk, has_csa));
    DI_RETURN_IF_ERROR(f.get_int({"hc_mult"}, &c.hc_mult, false));
    DI_RETURN_IF_ERROR(f.get_int({"hc_sinkhorn_iters"}, &c.hc_sinkhorn_iters, false));
    DI_RETURN_IF_ERROR(f.get_double({"hc_eps"}, &c.hc_eps, false));
    DI_RETURN_IF_ERROR(f.get_double({"rms_norm_eps", "norm_eps"}, &c.rms_norm_eps, false));
    DI_RETURN_IF_ERROR(
        f.get_int({"num_nextn_predict_layers", "n_mtp_layers"}, &c.num_nextn_predict_layers, false));
    DI_RETURN_IF_ERROR(f.get_token_id("bos_token_id", &c.bos_token_id));
    DI_RETURN_IF_ERROR(f.get_token_id("eos_token_id", &c.eos_token_id));
    DI_RETURN_IF_ERROR(f.get_bool({"tie_word_embeddings"}, &c.tie_word_embeddings));
    return parse_quant(f, c);
}

} // namespace

core::Result<ModelConfig> ModelConfig::from_json_string(const std::string& text,
                                                        const std::string& source_name) {
    DI_ASSIGN_OR_RETURN(json root, parse_config_json(text, source_name));
    ModelConfig c;
    DI_RETURN_IF_ERROR(parse(root, source_name, c));
    DI_RETURN_IF_ERROR(c.validate(source_name));
    return c;
}

core::Result<ModelConfig> ModelConfig::from_json_file(const std::string& path) {
    DI_ASSIGN_OR_RETURN(std::string text, read_config_file(path));
    return from_json_string(text, path);
}

} // namespace deepinfer::model::deepseek_v4
