#include "model/registry.h"

#include <nlohmann/json.hpp>

#include "model/config_fields.h"
#include "model/deepseek_v4/model.h"
#include "model/deepseek_v41/config.h"
#include "model/deepseek_v41/model.h"

namespace deepinfer::model {

namespace {

using nlohmann::json;

bool is_v4(const json& obj) {
    if (auto it = obj.find("model_type"); it != obj.end() && it->is_string()) {
        const std::string t = it->get<std::string>();
        if (t == "deepseek_v4" || t == "deepseek_v4_text") return true;
    }
    if (auto it = obj.find("architectures"); it != obj.end() && it->is_array())
        for (const json& a : *it)
            if (a.is_string() && (a.get<std::string>() == "DeepseekV4ForCausalLM" ||
                                  a.get<std::string>() == "DeepseekV4Model"))
                return true;
    return false;
}

} // namespace

const char* family_name(ModelFamily f) {
    switch (f) {
    case ModelFamily::kDeepseekV4:
        return "deepseek_v4";
    case ModelFamily::kDeepseekV41:
        return "deepseek_v41";
    }
    return "?";
}

core::Result<ModelFamily> detect_family(const std::string& json_text, const std::string& source) {
    const json root = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
    if (root.is_discarded() || !root.is_object())
        return core::invalid_argument(source + ": not a JSON object");
    if (deepseek_v41::is_deepseek_v41_config(json_text)) return ModelFamily::kDeepseekV41;
    if (is_v4(root)) return ModelFamily::kDeepseekV4;
    if (auto it = root.find("text_config"); it != root.end() && it->is_object() && is_v4(*it))
        return ModelFamily::kDeepseekV4;
    const char* supported = " (supported: model_type deepseek_v4 / deepseek_v41 / deepseek_v41_text, "
                            "architectures DeepseekV4ForCausalLM / DeepseekV41ForCausalLM)";
    if (auto it = root.find("model_type"); it != root.end())
        return core::invalid_argument(source + ": field 'model_type' is " + it->dump() +
                                      ", not a supported model family" + supported);
    if (auto it = root.find("architectures"); it != root.end())
        return core::invalid_argument(source + ": field 'architectures' is " + it->dump() +
                                      ", not a supported model family" + supported);
    return core::invalid_argument(source +
                                  ": field 'model_type' is missing (and no 'architectures'), so the "
                                  "model family is unknown" +
                                  std::string(supported));
}

core::Result<std::unique_ptr<CausalLm>> load_causal_lm(const std::string& dir) {
    const std::string path = dir + "/config.json";
    DI_ASSIGN_OR_RETURN(std::string text, read_config_file(path));
    DI_ASSIGN_OR_RETURN(ModelFamily family, detect_family(text, path));
    switch (family) {
    case ModelFamily::kDeepseekV4: {
        DI_ASSIGN_OR_RETURN(auto m, deepseek_v4::DeepseekV4Model::load(dir));
        return std::unique_ptr<CausalLm>(std::move(m));
    }
    case ModelFamily::kDeepseekV41: {
        DI_ASSIGN_OR_RETURN(auto m, deepseek_v41::DeepseekV41Model::load(dir));
        return std::unique_ptr<CausalLm>(std::move(m));
    }
    }
    return core::internal_error("unreachable");
}

} // namespace deepinfer::model
