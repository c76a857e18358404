#include "engine/offline.h"

#include <chrono>
#include <cstdio>
#include <istream>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>
#include <unordered_map>

namespace deepinfer::engine {

namespace {
using nlohmann::json;

core::Status field_error(const std::string& field, const std::string& why) {
    return core::invalid_argument("field '" + field + "' " + why);
}

// Reads an optional field of type T; a wrong type is an error naming the field.
template <typename T> core::Status get(const json& j, const char* field, T* out) {
    auto it = j.find(field);
    if (it == j.end() || it->is_null()) return {};
    try {
        *out = it->get<T>();
    } catch (const json::exception& e) {
        return field_error(field, std::string("has the wrong type: ") + e.what());
    }
    return {};
}
template <typename T> core::Status get_opt(const json& j, const char* field, std::optional<T>* out) {
    if (!j.contains(field) || j[field].is_null()) return {};
    T v{};
    DI_RETURN_IF_ERROR(get(j, field, &v));
    *out = v;
    return {};
}

void draw_progress(int64_t done, int64_t total, double seconds, int64_t tokens) {
    const int width = 30;
    int filled = total > 0 ? static_cast<int>(width * done / total) : width;
    std::string bar(filled, '#');
    bar.resize(width, '.');
    std::fprintf(stderr, "\r[%s] %lld/%lld requests  %.1f tok/s  %.0fs", bar.c_str(), (long long)done,
                 (long long)total, seconds > 0 ? tokens / seconds : 0.0, seconds);
    std::fflush(stderr);
}

struct Pending {
    std::string error;
    std::vector<int32_t> prompt;
    std::vector<std::vector<int32_t>> outputs;
    std::vector<std::string> finish;
    std::vector<std::vector<TokenLogprob>> logprobs;
    bool want_logprobs = false;
    bool done = false;
};

json logprobs_json(const std::vector<TokenLogprob>& lps) {
    json a = json::array();
    for (const auto& lp : lps) {
        json top = json::array();
        for (const auto& t : lp.top) top.push_back({{"token_id", t.token_id}, {"logprob", t.logprob}});
        a.push_back({{"token_id", lp.token_id}, {"logprob", lp.logprob}, {"rank", lp.rank}, {"top", top}});
    }
    return a;
}
} // namespace

core::Result<Request> parse_offline_line(const std::string& line, const OfflineOptions& options) {
    json j;
    try {
        j = json::parse(line);
    } catch (const json::exception& e) {
        return core::invalid_argument(std::string("not valid JSON: ") + e.what());
    }
    if (!j.is_object()) return core::invalid_argument("line is not a JSON object");
    static const char* kKnown[] = {"id",
                                   "prompt_ids",
                                   "prompt",
                                   "n",
                                   "temperature",
                                   "top_k",
                                   "top_p",
                                   "min_p",
                                   "repetition_penalty",
                                   "presence_penalty",
                                   "frequency_penalty",
                                   "logit_bias",
                                   "seed",
                                   "max_tokens",
                                   "min_tokens",
                                   "stop_token_ids",
                                   "ignore_eos",
                                   "logprobs",
                                   "prompt_logprobs"};
    for (auto it = j.begin(); it != j.end(); ++it) {
        bool known = false;
        for (const char* k : kKnown) known = known || it.key() == k;
        if (!known) return field_error(it.key(), "is not a known request field");
    }
    Request r;
    SamplingParams& p = r.params;
    p = options.defaults;
    if (j.contains("prompt_ids")) {
        DI_RETURN_IF_ERROR(get(j, "prompt_ids", &r.prompt_ids));
    } else if (j.contains("prompt")) {
        if (!options.tokenize) return field_error("prompt", "needs a tokenizer; give prompt_ids instead");
        std::string text;
        DI_RETURN_IF_ERROR(get(j, "prompt", &text));
        DI_ASSIGN_OR_RETURN(r.prompt_ids, options.tokenize(text));
    } else {
        return core::invalid_argument("line has neither 'prompt_ids' nor 'prompt'");
    }
    DI_RETURN_IF_ERROR(get(j, "n", &p.n));
    DI_RETURN_IF_ERROR(get(j, "temperature", &p.temperature));
    DI_RETURN_IF_ERROR(get(j, "top_k", &p.top_k));
    DI_RETURN_IF_ERROR(get(j, "top_p", &p.top_p));
    DI_RETURN_IF_ERROR(get(j, "min_p", &p.min_p));
    DI_RETURN_IF_ERROR(get(j, "repetition_penalty", &p.repetition_penalty));
    DI_RETURN_IF_ERROR(get(j, "presence_penalty", &p.presence_penalty));
    DI_RETURN_IF_ERROR(get(j, "frequency_penalty", &p.frequency_penalty));
    if (j.contains("logit_bias")) {
        std::map<std::string, float> bias;
        DI_RETURN_IF_ERROR(get(j, "logit_bias", &bias));
        p.logit_bias.clear();
        for (const auto& [k, v] : bias) {
            try {
                p.logit_bias.emplace_back(std::stoi(k), v);
            } catch (...) {
                return field_error("logit_bias", "key '" + k + "' is not a token id");
            }
        }
    }
    DI_RETURN_IF_ERROR(get_opt(j, "seed", &p.seed));
    DI_RETURN_IF_ERROR(get_opt(j, "max_tokens", &p.max_tokens));
    DI_RETURN_IF_ERROR(get(j, "min_tokens", &p.min_tokens));
    DI_RETURN_IF_ERROR(get(j, "stop_token_ids", &p.stop_token_ids));
    DI_RETURN_IF_ERROR(get(j, "ignore_eos", &p.ignore_eos));
    DI_RETURN_IF_ERROR(get_opt(j, "logprobs", &p.logprobs));
    DI_RETURN_IF_ERROR(get_opt(j, "prompt_logprobs", &p.prompt_logprobs));
    DI_RETURN_IF_ERROR(get(j, "id", &r.id));
    return r;
}

core::Result<OfflineSummary> run_offline_jsonl(LLMEngine& engine, std::istream& in, std::ostream& out,
                                               const OfflineOptions& options) {
    const auto t0 = std::chrono::steady_clock::now();
    OfflineSummary summary;
    std::vector<Pending> items;
    std::unordered_map<std::string, size_t> index_of;
    std::string line;
    while (std::getline(in, line)) {
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        size_t index = items.size();
        Pending& item = items.emplace_back();
        auto req = parse_offline_line(line, options);
        core::Status st = req.status();
        if (req.ok()) {
            req->id = "offline-" + std::to_string(index);
            item.prompt = req->prompt_ids;
            int32_t n = req->params.n;
            item.outputs.resize(n);
            item.finish.resize(n);
            item.logprobs.resize(n);
            item.want_logprobs = req->params.logprobs.has_value();
            std::string id = req->id;
            st = engine.add_request(std::move(*req));
            if (st.ok()) index_of[id] = index;
        }
        if (!st.ok()) {
            item.error = "line " + std::to_string(index + 1) + ": " + st.to_string();
            item.done = true;
            ++summary.num_errors;
        }
    }
    summary.num_requests = static_cast<int64_t>(items.size());
    int64_t done = summary.num_errors, drawn = -1;
    auto write_ready = [&, next = size_t(0)]() mutable {
        for (; next < items.size() && items[next].done; ++next) {
            const Pending& it = items[next];
            json o = {{"index", next}};
            if (!it.error.empty()) {
                o["error"] = it.error;
            } else {
                o["prompt_ids"] = it.prompt;
                o["output_ids"] = it.outputs[0];
                o["finish_reason"] = it.finish[0];
                if (options.detokenize) o["text"] = options.detokenize(it.outputs[0]);
                if (it.want_logprobs) o["logprobs"] = logprobs_json(it.logprobs[0]);
                if (it.outputs.size() > 1) {
                    json all = json::array();
                    for (size_t k = 0; k < it.outputs.size(); ++k) {
                        json c = {{"output_ids", it.outputs[k]}, {"finish_reason", it.finish[k]}};
                        if (options.detokenize) c["text"] = options.detokenize(it.outputs[k]);
                        if (it.want_logprobs) c["logprobs"] = logprobs_json(it.logprobs[k]);
                        all.push_back(std::move(c));
                    }
                    o["outputs"] = std::move(all);
                }
            }
            out << o.dump() << "\n";
        }
    };
    while (engine.has_work()) {
        DI_ASSIGN_OR_RETURN(auto outs, engine.step());
        for (const RequestOutput& o : outs) {
            Pending& it = items[index_of.at(o.request_id)];
            for (const CompletionDelta& d : o.deltas) {
                auto& dst = it.outputs[d.index];
                dst.insert(dst.end(), d.token_ids.begin(), d.token_ids.end());
                summary.output_tokens += static_cast<int64_t>(d.token_ids.size());
                auto& lps = it.logprobs[d.index];
                lps.insert(lps.end(), d.logprobs.begin(), d.logprobs.end());
                if (d.finish_reason) it.finish[d.index] = std::string(finish_reason_name(*d.finish_reason));
            }
            if (o.finished) {
                if (!o.status.ok()) it.error = o.status.to_string();
                it.done = true;
                ++done;
                summary.prompt_tokens += o.prompt_tokens;
            }
        }
        write_ready();
        if (options.progress && done != drawn) { // redraw when a request finishes, not every step
            drawn = done;
            draw_progress(done, summary.num_requests,
                          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                          summary.output_tokens);
        }
    }
    write_ready();
    if (options.progress) std::fprintf(stderr, "\n");
    summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return summary;
}

} // namespace deepinfer::engine
