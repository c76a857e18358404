// Loading tokenizer.json into Tokenizer::Impl. Every unsupported component is reported by name instead of
// being skipped, so a tokenizer we cannot run exactly is never run approximately.

#include <climits>
#include <cstdint>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/word_level.h"

namespace deepinfer::tokenizer {

namespace {

using json = nlohmann::json;
using core::Result;
using core::Status;

std::string type_of(const json& j) {
    return j.contains("type") && j["type"].is_string() ? j["type"].get<std::string>() : "";
}

Status load_normalizer(const json& j, Normalizer& n) {
    if (j.is_null()) return {};
    const std::string t = type_of(j);
    if (t == "Sequence") {
        for (const auto& x : j.at("normalizers")) DI_RETURN_IF_ERROR(load_normalizer(x, n));
        return {};
    }
    Normalizer::Step s{};
    if (t == "Replace") {
        const json& p = j.at("pattern");
        s.content = j.at("content").get<std::string>();
        if (p.contains("String")) {
            s.kind = Normalizer::Step::Kind::kReplace;
            s.pattern = p["String"].get<std::string>();
        } else {
            s.kind = Normalizer::Step::Kind::kReplaceRegex;
            DI_ASSIGN_OR_RETURN(Regex re, Regex::compile(p.at("Regex").get<std::string>()));
            s.regex = std::make_shared<Regex>(std::move(re));
        }
    } else if (t == "Prepend") {
        s.kind = Normalizer::Step::Kind::kPrepend;
        s.content = j.at("prepend").get<std::string>();
    } else if (t == "Strip") {
        s.kind = Normalizer::Step::Kind::kStrip;
        s.strip_left = j.value("strip_left", true);
        s.strip_right = j.value("strip_right", true);
    } else {
        return core::unimplemented("normalizer type '" + t + "' is not supported");
    }
    n.add(std::move(s));
    return {};
}

Result<SplitBehavior> parse_behavior(const std::string& b) {
    if (b == "Removed") return SplitBehavior::kRemoved;
    if (b == "Isolated") return SplitBehavior::kIsolated;
    if (b == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
    if (b == "MergedWithNext") return SplitBehavior::kMergedWithNext;
    if (b == "Contiguous") return SplitBehavior::kContiguous;
    return core::invalid_argument("unknown split behavior '" + b + "'");
}

Result<std::unique_ptr<PreTokenizer>> load_pre_tokenizer(const json& j) {
    const std::string t = type_of(j);
    if (t == "Sequence") {
        std::vector<std::unique_ptr<PreTokenizer>> items;
        for (const auto& x : j.at("pretokenizers")) {
            DI_ASSIGN_OR_RETURN(auto p, load_pre_tokenizer(x));
            items.push_back(std::move(p));
        }
        return make_sequence(std::move(items));
    }
    if (t == "Split") {
        const json& p = j.at("pattern");
        DI_ASSIGN_OR_RETURN(Regex re, p.contains("Regex")
                                          ? Regex::compile(p["Regex"].get<std::string>())
                                          : Regex::literal(p.at("String").get<std::string>()));
        DI_ASSIGN_OR_RETURN(SplitBehavior b, parse_behavior(j.at("behavior").get<std::string>()));
        return make_split(std::move(re), b, j.value("invert", false));
    }
    if (t == "ByteLevel")
        return make_byte_level(j.value("add_prefix_space", false), j.value("use_regex", true));
    if (t == "Digits") {
        const bool individual = j.value("individual_digits", false);
        DI_ASSIGN_OR_RETURN(Regex re, Regex::compile("\\p{N}"));
        return make_split(std::move(re), individual ? SplitBehavior::kIsolated : SplitBehavior::kContiguous,
                          false);
    }
    if (t == "WhitespaceSplit") {
        DI_ASSIGN_OR_RETURN(Regex re, Regex::compile("\\s+"));
        return make_split(std::move(re), SplitBehavior::kRemoved, false);
    }
    if (t == "Whitespace") {
        DI_ASSIGN_OR_RETURN(Regex re, Regex::compile("\\w+|[^\\w\\s]+"));
        return make_split(std::move(re), SplitBehavior::kRemoved, true);
    }
    return core::unimplemented("pre_tokenizer type '" + t + "' is not supported");
}

// Applies the decoder chain to one token string, giving its bytes. All supported decoders act token by
// token, so each id's bytes are computed once at load time.
Result<std::string> decode_one(const json& j, std::string tok) {
    if (j.is_null()) return tok;
    const std::string t = type_of(j);
    if (t == "Sequence") {
        for (const auto& x : j.at("decoders")) {
            DI_ASSIGN_OR_RETURN(tok, decode_one(x, std::move(tok)));
        }
        return tok;
    }
    if (t == "ByteLevel") {
        // HF: a token whose every char is in the byte alphabet maps to those bytes; otherwise (added
        // tokens such as "<｜User｜>") its UTF-8 is used as is.
        auto b = byte_level::decode_token(tok);
        return b ? *b : tok;
    }
    if (t == "ByteFallback") {
        if (tok.size() == 6 && tok.compare(0, 3, "<0x") == 0 && tok[5] == '>') {
            return std::string(1, static_cast<char>(std::stoi(tok.substr(3, 2), nullptr, 16)));
        }
        return tok;
    }
    if (t == "Fuse") return tok;
    if (t == "Replace") {
        const std::string pat = j.at("pattern").at("String").get<std::string>();
        const std::string content = j.at("content").get<std::string>();
        std::string out;
        std::size_t pos = 0;
        while (!pat.empty()) {
            const std::size_t hit = tok.find(pat, pos);
            if (hit == std::string::npos) break;
            out.append(tok, pos, hit - pos);
            out += content;
            pos = hit + pat.size();
        }
        out.append(tok, pos, std::string::npos);
        return out;
    }
    return core::unimplemented("decoder type '" + t + "' is not supported");
}

Status load_post_processor(const json& j, const Tokenizer::Impl& im, std::vector<TokenId>& prefix,
                           std::vector<TokenId>& suffix) {
    if (j.is_null()) return {};
    const std::string t = type_of(j);
    if (t == "ByteLevel") return {};
    if (t == "Sequence") {
        for (const auto& x : j.at("processors"))
            DI_RETURN_IF_ERROR(load_post_processor(x, im, prefix, suffix));
        return {};
    }
    if (t == "TemplateProcessing") {
        bool seen_sequence = false;
        for (const auto& piece : j.at("single")) {
            if (piece.contains("Sequence")) {
                seen_sequence = true;
                continue;
            }
            const std::string name = piece.at("SpecialToken").at("id").get<std::string>();
            const json& ids = j.at("special_tokens").at(name).at("ids");
            for (const auto& id : ids) (seen_sequence ? suffix : prefix).push_back(id.get<TokenId>());
        }
        return {};
    }
    return core::unimplemented("post_processor type '" + t + "' is not supported");
}

// The BPE part of `model`: merges and options.
Status load_bpe(const json& model, std::unordered_map<std::string, TokenId> vocab, Tokenizer::Impl& im) {
    if (model.contains("dropout") && !model["dropout"].is_null() && model["dropout"].get<double>() > 0)
        return core::unimplemented("BPE dropout is not supported");
    for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"}) {
        if (model.contains(k) && model[k].is_string() && !model[k].get<std::string>().empty())
            return core::unimplemented(std::string("BPE ") + k + " is not supported");
    }
    std::vector<std::pair<std::string, std::string>> merges;
    for (const auto& m : model.at("merges")) {
        if (m.is_array()) {
            merges.emplace_back(m.at(0).get<std::string>(), m.at(1).get<std::string>());
        } else {
            const std::string s = m.get<std::string>();
            const std::size_t sp = s.find(' ');
            if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
                return core::invalid_argument("malformed merge '" + s + "'");
            merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
        }
    }
    Bpe::Options opt;
    opt.byte_level = im.pre_tokenizer && im.pre_tokenizer->byte_level();
    if (model.contains("unk_token") && model["unk_token"].is_string()) opt.unk_token = model["unk_token"];
    opt.fuse_unk = model.value("fuse_unk", false);
    opt.byte_fallback = model.value("byte_fallback", false);
    opt.ignore_merges = model.value("ignore_merges", false);
    DI_ASSIGN_OR_RETURN(im.bpe, Bpe::create(std::move(vocab), merges, opt));
    return {};
}

Result<std::unique_ptr<Tokenizer::Impl>> load(const json& root) {
    auto im = std::make_unique<Tokenizer::Impl>();
    const json& model = root.at("model");
    const std::string model_type = model.contains("type") ? type_of(model) : "BPE";
    if (model_type != "BPE" && model_type != "WordLevel")
        return core::unimplemented("model.type '" + model_type + "' is not supported (BPE, WordLevel)");

    DI_RETURN_IF_ERROR(load_normalizer(root.value("normalizer", json()), im->normalizer));
    if (root.contains("pre_tokenizer") && !root["pre_tokenizer"].is_null()) {
        DI_ASSIGN_OR_RETURN(im->pre_tokenizer, load_pre_tokenizer(root["pre_tokenizer"]));
    }

    std::unordered_map<std::string, TokenId> vocab;
    TokenId max_id = -1;
    for (const auto& [k, v] : model.at("vocab").items()) {
        if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX)
            return core::invalid_argument("model.vocab['" + k + "']: id must be a non-negative integer");
        vocab.emplace(k, v.get<TokenId>());
        max_id = std::max(max_id, v.get<TokenId>());
    }
    std::vector<std::pair<std::string, TokenId>> vocab_list(vocab.begin(), vocab.end());
    if (model_type == "WordLevel") {
        // tokenizers' WordLevel: unk_token defaults to "<unk>"; the pre-tokenizer's words are looked up
        // whole.
        const std::string unk = model.contains("unk_token") && model["unk_token"].is_string()
                                    ? model["unk_token"].get<std::string>()
                                    : std::string("<unk>");
        DI_ASSIGN_OR_RETURN(im->word_level, WordLevel::create(std::move(vocab), unk));
    } else {
        DI_RETURN_IF_ERROR(load_bpe(model, std::move(vocab), *im));
    }
    for (const auto& a : root.value("added_tokens", json::array())) {
        AddedToken t;
        t.content = a.at("content").get<std::string>();
        t.id = a.at("id").get<TokenId>();
        t.special = a.value("special", false);
        t.normalized = a.value("normalized", !t.special);
        t.lstrip = a.value("lstrip", false);
        t.rstrip = a.value("rstrip", false);
        t.single_word = a.value("single_word", false);
        max_id = std::max(max_id, t.id);
        im->added.push_back(std::move(t));
    }
    for (std::size_t i = 0; i < im->added.size(); ++i) {
        const AddedToken& t = im->added[i];
        im->added_by_content[t.content] = t.id;
        (t.normalized ? im->normalized_matcher : im->raw_matcher).add(t, i);
    }

    const json decoder = root.value("decoder", json());
    // tokenizers joins the token strings with a space when there is no decoder (`tokens.join(" ")`).
    if (decoder.is_null()) im->separator = " ";
    const std::size_t n = static_cast<std::size_t>(max_id + 1);
    im->id_to_token.assign(n, "");
    im->decoded.assign(n, "");
    im->special.assign(n, 0);
    im->known.assign(n, 0);
    auto set = [&](TokenId id, const std::string& s) -> Status {
        im->id_to_token[id] = s;
        DI_ASSIGN_OR_RETURN(im->decoded[id], decode_one(decoder, s));
        im->known[id] = 1;
        return {};
    };
    for (const auto& [s, id] : vocab_list) DI_RETURN_IF_ERROR(set(id, s));
    for (const AddedToken& t : im->added) {
        DI_RETURN_IF_ERROR(set(t.id, t.content));
        im->special[t.id] = t.special;
    }
    DI_RETURN_IF_ERROR(
        load_post_processor(root.value("post_processor", json()), *im, im->prefix_ids, im->suffix_ids));
    return im;
}

} // namespace

Result<Tokenizer> Tokenizer::from_json(std::string_view json_text) {
    try {
        const json root = json::parse(json_text);
        DI_ASSIGN_OR_RETURN(auto impl, load(root));
        return Tokenizer(std::move(impl));
    } catch (const std::exception& e) {
        return core::invalid_argument(std::string("tokenizer.json: ") + e.what());
    }
}

Result<Tokenizer> Tokenizer::from_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) return core::not_found("tokenizer file not found: " + path);
    std::stringstream ss;
    ss << f.rdbuf();
    auto r = from_json(ss.str());
    if (!r.ok()) return r.status().with_context(path);
    return r;
}

} // namespace deepinfer::tokenizer
