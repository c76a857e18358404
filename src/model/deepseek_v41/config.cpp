#include "model/deepseek_v41/config.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <sstream>

#include "model/config_fields.h"

#include "core/logging.h"

namespace deepinfer::model::deepseek_v41 {
namespace {

using nlohmann::json;

using Fields = model::ConfigFields;

// A YaRN block ({rope_type|type, factor, original_max_position_embeddings, beta_fast, beta_slow}); any
// other rope type leaves YaRN off.
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

core::Status parse_rope(const Fields& f, ModelConfig& c) {
    DI_RETURN_IF_ERROR(f.get_double({"rope_theta"}, &c.rope_theta, false));
    DI_RETURN_IF_ERROR(f.get_double({"compress_rope_theta"}, &c.compress_rope_theta, false));
    double partial = 0.0;
    if (const json* rs = f.find({"rope_scaling"})) { // official (and transformers' input field)
        if (!rs->is_object()) return f.error("rope_scaling", "must be an object");
        DI_RETURN_IF_ERROR(parse_yarn(Fields(*rs, f.source(), f.prefix() + "rope_scaling."), c.yarn));
    }
    if (f.has({"rope_factor"})) { // inference-side short names
        c.yarn.enabled = true;
        DI_RETURN_IF_ERROR(f.get_double({"rope_factor"}, &c.yarn.factor, true));
        DI_RETURN_IF_ERROR(f.get_int({"original_seq_len"}, &c.yarn.original_max_position_embeddings, true));
        DI_RETURN_IF_ERROR(f.get_double({"beta_fast"}, &c.yarn.beta_fast, false));
        DI_RETURN_IF_ERROR(f.get_double({"beta_slow"}, &c.yarn.beta_slow, false));
    }
    // transformers: rope_parameters{main, compress}; when present it is what transformers computes with.
    if (const json* rp = f.find({"rope_parameters"}); rp && rp->is_object() && rp->contains("compress")) {
        for (const char* part : {"main", "compress"}) {
            auto it = rp->find(part);
            if (it == rp->end()) continue;
            const std::string prefix = f.prefix() + "rope_parameters." + part + ".";
            if (!it->is_object()) return f.error(std::string("rope_parameters.") + part, "must be an object");
            Fields pf(*it, f.source(), prefix);
            const bool main = std::string(part) == "main";
            DI_RETURN_IF_ERROR(
                pf.get_double({"rope_theta"}, main ? &c.rope_theta : &c.compress_rope_theta, false));
            DI_RETURN_IF_ERROR(pf.get_double({"partial_rotary_factor"}, &partial, false));
            if (!main) {
                c.yarn = YarnConfig{};
                DI_RETURN_IF_ERROR(parse_yarn(pf, c.yarn));
            }
        }
    } else if (rp != nullptr && !rp->is_object()) {
        return f.error("rope_parameters", "must be an object");
    }
    if (f.has({"qk_rope_head_dim", "rope_head_dim"})) {
        DI_RETURN_IF_ERROR(f.get_int({"qk_rope_head_dim", "rope_head_dim"}, &c.qk_rope_head_dim, true));
    } else if (partial > 0.0) {
        const double rd = partial * static_cast<double>(c.head_dim);
        c.qk_rope_head_dim = static_cast<int64_t>(rd + 0.5);
        if (std::abs(rd - static_cast<double>(c.qk_rope_head_dim)) > 1e-6)
            return f.error("rope_parameters.compress.partial_rotary_factor",
                           "times head_dim is not an integer");
    } else {
        return f.error("qk_rope_head_dim", "is missing");
    }
    return {};
}

// compress_ratios and the CSA2 schedule, with transformers' defaults when a field is absent.
core::Status parse_schedule(const Fields& f, ModelConfig& c) {
    const int64_t n = c.num_hidden_layers;
    bool found = false;
    std::vector<int64_t> ratios;
    DI_RETURN_IF_ERROR(f.get_int_list({"compress_ratios"}, &ratios, &found));
    const std::vector<int64_t> released = [] {
        std::vector<int64_t> r{0, 0};
        r.insert(r.end(), 18, 2);
        r.insert(r.end(), 20, 1);
        return r;
    }();
    if (!found) { // transformers' default: the released schedule, or it scaled to n layers
        if (n == static_cast<int64_t>(released.size())) {
            ratios = released;
        } else {
            const int64_t slide = std::min<int64_t>(2, n), enc = std::max<int64_t>(0, (n - slide + 1) / 2);
            ratios.assign(slide, 0);
            ratios.insert(ratios.end(), enc, 2);
            ratios.insert(ratios.end(), std::max<int64_t>(0, n - slide - enc), 1);
        }
    }
    const int64_t given = static_cast<int64_t>(ratios.size());
    if (given < n || given > n + c.num_nextn_predict_layers)
        return f.error("compress_ratios", "has " + std::to_string(given) +
                                              " entries, expected num_hidden_layers (" + std::to_string(n) +
                                              ") up to num_hidden_layers + num_nextn_predict_layers (" +
                                              std::to_string(n + c.num_nextn_predict_layers) + ")");
    for (int64_t i = n; i < given; ++i)
        if (ratios[i] != 0)
            return f.error("compress_ratios[" + std::to_string(i) + "]",
                           "belongs to a DSpark draft layer and must be 0, got " + std::to_string(ratios[i]));
    c.compress_ratios.assign(ratios.begin(), ratios.begin() + n);

    DI_RETURN_IF_ERROR(f.get_int_list({"kv_source_layer_ids"}, &c.kv_source_layer_ids, &found));
    if (!found) {
        if (c.compress_ratios ==
            std::vector<int64_t>(released.begin(), released.begin() + std::min<int64_t>(n, released.size())))
            c.kv_source_layer_ids = {2, 8, 14, 20};
        else
            for (int64_t i = 0; i < n; ++i)
                if (c.compress_ratios[i] > 0 && (i == 0 || c.compress_ratios[i - 1] != c.compress_ratios[i]))
                    c.kv_source_layer_ids.push_back(i);
    }
    DI_RETURN_IF_ERROR(f.get_int_list({"index_source_layer_ids"}, &c.index_source_layer_ids, &found));
    if (!found)
        c.index_source_layer_ids = c.kv_source_layer_ids == std::vector<int64_t>{2, 8, 14, 20}
                                       ? std::vector<int64_t>{2, 8, 14, 20, 24, 28, 32, 36}
                                       : c.kv_source_layer_ids;
    std::string used;
    if (const json* cs = f.find({"candidate_source_layer_id", "candidate_source_layer"}, &used)) {
        if (!cs->is_number_integer()) return f.error(used, "must be an integer, got " + cs->dump());
        c.candidate_source_layer_id = std::max<int64_t>(-1, cs->get<int64_t>()); // negative disables
    } else {
        c.candidate_source_layer_id = c.kv_source_layer_ids.empty() ? -1 : c.kv_source_layer_ids.back();
    }
    DI_RETURN_IF_ERROR(f.get_int({"candidate_topk_blocks"}, &c.candidate_topk_blocks, false));
    DI_RETURN_IF_ERROR(f.get_int({"candidate_block_size"}, &c.candidate_block_size, false));
    const bool has_index = !c.index_source_layer_ids.empty();
    DI_RETURN_IF_ERROR(f.get_int({"index_n_heads"}, &c.index_n_heads, has_index));
    DI_RETURN_IF_ERROR(f.get_int({"index_head_dim"}, &c.index_head_dim, has_index));
    DI_RETURN_IF_ERROR(f.get_int({"index_topk"}, &c.index_topk, has_index));
    return {};
}

core::Status parse_engram(const Fields& f, EngramConfig& e) {
    DI_RETURN_IF_ERROR(f.get_int_list({"engram_layer_ids"}, &e.layer_ids));
    bool found = false;
    DI_RETURN_IF_ERROR(f.get_int_list({"engram_num_embeddings"}, &e.num_embeddings, &found));
    if (!found) e.num_embeddings.assign(e.layer_ids.size(), 0);
    DI_RETURN_IF_ERROR(f.get_int({"engram_max_ngram_size"}, &e.max_ngram_size, false));
    DI_RETURN_IF_ERROR(f.get_int({"engram_vocab_size"}, &e.vocab_size, false));
    DI_RETURN_IF_ERROR(f.get_int({"engram_n_heads"}, &e.n_heads, false));
    DI_RETURN_IF_ERROR(f.get_int({"engram_head_dim"}, &e.head_dim, false));
    DI_RETURN_IF_ERROR(f.get_int({"engram_pad_token_id", "engram_pad_id"}, &e.pad_token_id, false));
    DI_RETURN_IF_ERROR(f.get_int({"engram_compressed_vocab_size"}, &e.compressed_vocab_size, false));
    return {};
}

core::Status parse_quant(const Fields& root, const Fields& text, ModelConfig& c) {
    for (const Fields* f : {&root, &text}) {
        if (const json* dt = f->find({"dtype"}); dt && dt->is_string() && dt->get<std::string>() == "fp8")
            c.quant.fp8 = true;
        if (const json* ed = f->find({"expert_dtype"})) {
            if (!ed->is_string()) return f->error("expert_dtype", "must be a string");
            c.expert_fp4 = ed->get<std::string>() == "fp4";
        }
    }
    const json* qc = root.find({"quantization_config"});
    if (qc == nullptr) qc = text.find({"quantization_config"});
    if (qc == nullptr) return {};
    if (!qc->is_object()) return root.error("quantization_config", "must be an object");
    Fields q(*qc, root.source(), "quantization_config.");
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
    if (const json* ed = q.find({"expert_dtype"})) {
        if (!ed->is_string()) return q.error("expert_dtype", "must be a string");
        c.expert_fp4 = ed->get<std::string>() == "fp4";
    }
    int64_t group = c.quant.fp4_group;
    DI_RETURN_IF_ERROR(q.get_int({"fp4_group_size"}, &group, false));
    c.quant.fp4_group = static_cast<int>(group);
    return {};
}

// vision_config (or the flat vision_* names) is recorded and ignored: images are not supported yet.
void note_vision(const json& root, const std::string& src, VisionConfig& v) {
    const json* vc = nullptr;
    if (auto it = root.find("vision_config"); it != root.end() && it->is_object()) vc = &*it;
    auto get = [&](const char* nested, const char* flat) -> int64_t {
        if (vc != nullptr)
            if (auto it = vc->find(nested); it != vc->end() && it->is_number_integer())
                return it->get<int64_t>();
        if (auto it = root.find(flat); it != root.end() && it->is_number_integer()) return it->get<int64_t>();
        return 0;
    };
    v.num_hidden_layers = get("num_hidden_layers", "vision_n_layers");
    v.hidden_size = get("hidden_size", "vision_dim");
    v.patch_size = get("patch_size", "vision_patch_size");
    v.present = vc != nullptr || v.num_hidden_layers > 0;
    if (!v.present) return;
    DI_LOG(Info) << src << ": vision_config (" << v.num_hidden_layers << " ViT layers, patch " << v.patch_size
                 << ") ignored: images are not supported yet, text only";
}

core::Status check_model_type(const json& root, const std::string& src) {
    auto it = root.find("model_type");
    if (it == root.end() || it->is_null()) return {};
    if (!it->is_string()) return core::invalid_argument(src + ": field 'model_type' must be a string");
    const std::string t = it->get<std::string>();
    if (t != "deepseek_v41" && t != "deepseek_v41_text")
        return core::invalid_argument(src + ": field 'model_type' is '" + t +
                                      "', not a DeepSeek V4.1 model (deepseek_v41)");
    return {};
}

core::Status parse(const json& root, const std::string& src, ModelConfig& c) {
    if (!root.is_object()) return core::invalid_argument(src + ": not a JSON object");
    DI_RETURN_IF_ERROR(check_model_type(root, src));
    const bool nested = root.contains("text_config") && !root["text_config"].is_null();
    if (nested && !root["text_config"].is_object())
        return core::invalid_argument(src + ": field 'text_config' must be an object");
    const json& obj = nested ? root["text_config"] : root;
    Fields f(obj, src, nested ? "text_config." : "");
    Fields top(root, src);
    if (nested) DI_RETURN_IF_ERROR(check_model_type(obj, src + " (text_config)"));
    DI_RETURN_IF_ERROR(f.get_int({"vocab_size"}, &c.vocab_size, true));
    DI_RETURN_IF_ERROR(f.get_int({"hidden_size", "dim"}, &c.hidden_size, true));
    DI_RETURN_IF_ERROR(f.get_int({"num_hidden_layers", "n_layers"}, &c.num_hidden_layers, true));
    DI_RETURN_IF_ERROR(f.get_int({"num_attention_heads", "n_heads"}, &c.num_attention_heads, true));
    DI_RETURN_IF_ERROR(f.get_int({"num_key_value_heads"}, &c.num_key_value_heads, false));
    DI_RETURN_IF_ERROR(f.get_int({"head_dim"}, &c.head_dim, true));
    DI_RETURN_IF_ERROR(f.get_int({"q_lora_rank"}, &c.q_lora_rank, true));
    DI_RETURN_IF_ERROR(f.get_int({"o_groups", "n_groups"}, &c.o_groups, true));
    DI_RETURN_IF_ERROR(f.get_int({"o_lora_rank"}, &c.o_lora_rank, true));
    DI_RETURN_IF_ERROR(f.get_int({"moe_intermediate_size", "moe_inter_dim"}, &c.moe_intermediate_size, true));
    DI_RETURN_IF_ERROR(f.get_int({"n_routed_experts", "num_local_experts"}, &c.n_routed_experts, true));
    DI_RETURN_IF_ERROR(
        f.get_int({"num_experts_per_tok", "n_activated_experts"}, &c.num_experts_per_tok, true));
    DI_RETURN_IF_ERROR(f.get_int({"n_shared_experts"}, &c.n_shared_experts, false));
    DI_RETURN_IF_ERROR(f.get_double({"gate_temp"}, &c.gate_temp, false));
    DI_RETURN_IF_ERROR(f.get_bool({"norm_topk_prob"}, &c.norm_topk_prob));
    DI_RETURN_IF_ERROR(
        f.get_double({"routed_scaling_factor", "route_scale"}, &c.routed_scaling_factor, false));
    DI_RETURN_IF_ERROR(f.get_double({"swiglu_limit"}, &c.swiglu_limit, false));
    DI_RETURN_IF_ERROR(f.get_int({"sliding_window", "window_size"}, &c.sliding_window, true));
    std::string used;
    if (const json* sf = f.find({"scoring_func", "score_func"}, &used)) {
        if (!sf->is_string() || sf->get<std::string>() != "sqrtsoftplus")
            return f.error(used, "must be \"sqrtsoftplus\", got " + sf->dump());
    }
    if (const json* tm = f.find({"topk_method"}, &used)) {
        if (!tm->is_string() || tm->get<std::string>() != "noaux_tc")
            return f.error(used, "must be \"noaux_tc\", got " + tm->dump());
    }
    DI_RETURN_IF_ERROR(
        f.get_int({"num_nextn_predict_layers", "n_mtp_layers"}, &c.num_nextn_predict_layers, false));
    DI_RETURN_IF_ERROR(parse_schedule(f, c));
    DI_RETURN_IF_ERROR(parse_rope(f, c));
    DI_RETURN_IF_ERROR(
        f.get_int({"max_position_embeddings", "max_seq_len"}, &c.max_position_embeddings, false));
    DI_RETURN_IF_ERROR(f.get_int({"hc_mult"}, &c.hc_mult, false));
    DI_RETURN_IF_ERROR(f.get_int({"hc_sinkhorn_iters"}, &c.hc_sinkhorn_iters, false));
    DI_RETURN_IF_ERROR(f.get_double({"hc_eps"}, &c.hc_eps, false));
    DI_RETURN_IF_ERROR(f.get_double({"rms_norm_eps", "norm_eps"}, &c.rms_norm_eps, false));
    DI_RETURN_IF_ERROR(parse_engram(f, c.engram));
    // Token ids may sit at the top level of the composite config or inside text_config.
    for (const Fields* src_fields : {&top, &f}) {
        DI_RETURN_IF_ERROR(src_fields->get_int({"image_token_id"}, &c.image_token_id, false));
        DI_RETURN_IF_ERROR(src_fields->get_token_id("bos_token_id", &c.bos_token_id));
        DI_RETURN_IF_ERROR(src_fields->get_token_id("eos_token_id", &c.eos_token_id));
        DI_RETURN_IF_ERROR(src_fields->get_bool({"tie_word_embeddings"}, &c.tie_word_embeddings));
    }
    DI_RETURN_IF_ERROR(parse_quant(top, f, c));
    note_vision(root, src, c.vision);
    return {};
}

} // namespace

int64_t EngramConfig::layer_index(int64_t layer) const {
    auto it = std::find(layer_ids.begin(), layer_ids.end(), layer);
    return it == layer_ids.end() ? -1 : static_cast<int64_t>(it - layer_ids.begin());
}

static int64_t nearest_at_or_before(const std::vector<int64_t>& ids, int64_t layer) {
    int64_t best = -1;
    for (int64_t s : ids)
        if (s <= layer) best = std::max(best, s);
    return best;
}

int64_t ModelConfig::kv_source_of(int64_t layer) const {
    if (layer < 0 || layer >= num_hidden_layers || compress_ratios[layer] == 0) return -1;
    return nearest_at_or_before(kv_source_layer_ids, layer);
}
int64_t ModelConfig::index_source_of(int64_t layer) const {
    if (layer < 0 || layer >= num_hidden_layers || compress_ratios[layer] == 0) return -1;
    return nearest_at_or_before(index_source_layer_ids, layer);
}
bool ModelConfig::is_kv_source(int64_t layer) const {
    return std::find(kv_source_layer_ids.begin(), kv_source_layer_ids.end(), layer) !=
           kv_source_layer_ids.end();
}
bool ModelConfig::is_index_source(int64_t layer) const {
    return std::find(index_source_layer_ids.begin(), index_source_layer_ids.end(), layer) !=
           index_source_layer_ids.end();
}
bool ModelConfig::uses_candidates(int64_t layer) const {
    return is_index_source(layer) && candidate_source_layer_id >= 0 && candidate_source_layer_id < layer;
}

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

bool is_deepseek_v41_config(const std::string& json_text) {
    json root = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
    if (!root.is_object()) return false;
    for (const json* obj : {&root, root.contains("text_config") ? &root["text_config"] : nullptr}) {
        if (obj == nullptr || !obj->is_object()) continue;
        if (auto it = obj->find("model_type"); it != obj->end() && it->is_string()) {
            const std::string t = it->get<std::string>();
            if (t == "deepseek_v41" || t == "deepseek_v41_text") return true;
        }
        if (auto it = obj->find("architectures"); it != obj->end() && it->is_array())
            for (const json& a : *it)
                if (a.is_string() && a.get<std::string>().rfind("DeepseekV41", 0) == 0) return true;
    }
    return false;
}

} // namespace deepinfer::model::deepseek_v41
