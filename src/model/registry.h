#pragma once
// The model registry: which family a checkpoint directory holds (from its config.json) and a loader that
// returns it as a model::CausalLm, so runners (cli, server, bench) never name a family.

#include <memory>
#include <string>

#include "core/status.h"
#include "model/causal_lm.h"

namespace deepinfer::model {

enum class ModelFamily { kDeepseekV4, kDeepseekV41 };

const char* family_name(ModelFamily f);

// The family of a config.json's text (`source` names the file in errors): `model_type` (top level or in
// `text_config`) or `architectures`, official and transformers spellings. An unknown or absent family is
// an error naming the file and the field.
core::Result<ModelFamily> detect_family(const std::string& json_text, const std::string& source);

// Reads DIR/config.json, picks the family, and loads the checkpoint.
core::Result<std::unique_ptr<CausalLm>> load_causal_lm(const std::string& dir);

} // namespace deepinfer::model
