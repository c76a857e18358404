#include "fake_backend.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <utility>

#include "request_queue.h"
#include "server/engine_backend_text.h"
#include "tokenizer/utf8.h"

namespace deepinfer::server {

namespace {

struct Pending {
    engine::Request request;
    OutputCallback callback;
};

// One engine request: n completions of one prompt, each with its own random stream.
struct Running {
    engine::Request request;
    OutputCallback callback;
    std::vector<std::mt19937_64> rng; // [n]
    std::vector<int> generated;       // [n]
    std::vector<bool> done;           // [n]
    bool first = true;
};

class ByteDetokenizer : public IncrementalDetokenizer {
public:
    std::string push(int32_t token) override {
        if (token == FakeBackend::kThink) return flush() + "<think>";
        if (token == FakeBackend::kEndThink) return flush() + "</think>";
        if (token < 0 || token > 255) return std::string(); // BOS/EOS and unused ids render as nothing
        return repair_.push(std::string(1, static_cast<char>(token)));
    }
    std::string flush() override { return repair_.finish(); }

private:
    tokenizer::utf8::StreamRepair repair_;
};

uint64_t hash_tokens(const std::vector<int32_t>& ids) {
    uint64_t h = 1469598103934665603ull;
    for (int32_t t : ids) h = (h ^ static_cast<uint64_t>(t)) * 1099511628211ull;
    return h;
}

} // namespace

struct FakeBackend::Impl {
    FakeBackendConfig config;
    BoundedQueue<Pending> queue;
    std::mutex mu; // guards running, aborted, counters below
    std::map<std::string, Running> running;
    std::set<std::string> aborted;
    std::set<std::string> live; // submitted and not yet finished
    std::atomic<int> queued{0};
    uint64_t prefix_queries = 0;
    uint64_t prefill_tokens = 0;
    std::atomic<uint64_t> nonce{0x9E3779B97F4A7C15ull};
    std::atomic<bool> stop{false};
    std::thread loop;

    explicit Impl(FakeBackendConfig c) : config(c), queue(c.max_queue) {
        loop = std::thread([this] { run(); });
    }
    ~Impl() {
        stop = true;
        queue.close();
        loop.join();
    }

    int32_t sample(const engine::SamplingParams& s, std::mt19937_64& rng) {
        for (const auto& [tok, bias] : s.logit_bias) {
            if (bias >= 100.0f) return tok; // a +100 bias makes a token certain
        }
        if (config.eos_probability > 0 &&
            std::uniform_real_distribution<double>(0, 1)(rng) < config.eos_probability) {
            return kEos;
        }
        static const char kAlphabet[] = "abcdefghijklmnopqrstuvwxyz      .,";
        for (;;) {
            int32_t t = static_cast<unsigned char>(kAlphabet[rng() % (sizeof(kAlphabet) - 1)]);
            bool banned = false; // -100 bans a token
            for (const auto& [tok, bias] : s.logit_bias) banned = banned || (tok == t && bias <= -100.0f);
            if (!banned) return t;
        }
    }

    // One token for every unfinished completion of r.
    engine::RequestOutput step_one(Running& r) {
        const engine::SamplingParams& sp = r.request.params;
        engine::RequestOutput out;
        out.request_id = r.request.id;
        if (r.first) {
            r.first = false;
            out.prompt_tokens = static_cast<int32_t>(r.request.prompt_ids.size());
            if (sp.prompt_logprobs) { // made up, but shaped as the engine's: the first entry is empty
                auto& plp = out.prompt_logprobs.emplace(r.request.prompt_ids.size());
                for (size_t k = 1; k < plp.size(); ++k) {
                    const int32_t t = r.request.prompt_ids[k];
                    engine::TokenLogprob lp{t, -1.0f - static_cast<float>(k % 7) / 8.0f, 2, {}};
                    for (int j = 0; j < *sp.prompt_logprobs; ++j)
                        lp.top.push_back({static_cast<int32_t>('a' + (t + j) % 26), -0.5f - j});
                    plp[k] = std::move(lp);
                }
            }
        }
        const int max_tokens = sp.max_tokens.value_or(config.context_length);
        for (size_t c = 0; c < r.rng.size(); ++c) {
            if (r.done[c]) continue;
            engine::CompletionDelta& d = out.deltas.emplace_back();
            d.index = static_cast<int32_t>(c);
            int32_t t = sample(sp, r.rng[c]);
            // As the engine: EOS and stop ids end a completion only after min_tokens; ignore_eos keeps going.
            const bool stops_allowed = r.generated[c] >= sp.min_tokens;
            if (t == kEos && (!stops_allowed || sp.ignore_eos)) t = 'a';
            ++r.generated[c];
            const bool stop_id =
                stops_allowed &&
                std::find(sp.stop_token_ids.begin(), sp.stop_token_ids.end(), t) != sp.stop_token_ids.end();
            if (t == kEos || stop_id) { // the token that ended it is part of the output, as in the engine
                d.token_ids.push_back(t);
                d.finish_reason = engine::FinishReason::kStop;
                d.stop_token_id = t;
            } else {
                d.token_ids.push_back(t);
                if (sp.logprobs) {
                    engine::TokenLogprob lp{
                        t, -0.5f - static_cast<float>(r.rng[c]() % 1000) / 1000.0f, 1, {}};
                    lp.top.push_back({t, lp.logprob});
                    for (int k = 1; k < *sp.logprobs; ++k) {
                        lp.top.push_back({static_cast<int32_t>('a' + (t + k) % 26), lp.logprob - k});
                    }
                    d.logprobs.push_back(std::move(lp));
                }
                int total = static_cast<int>(r.request.prompt_ids.size()) + r.generated[c];
                if (r.generated[c] >= max_tokens || total >= config.context_length) {
                    d.finish_reason = engine::FinishReason::kLength;
                }
            }
            d.num_output_tokens = r.generated[c];
            r.done[c] = d.finish_reason.has_value();
        }
        out.finished = std::all_of(r.done.begin(), r.done.end(), [](bool x) { return x; });
        return out;
    }

    static engine::RequestOutput aborted_output(const engine::Request& request) {
        engine::RequestOutput out;
        out.request_id = request.id;
        out.finished = true;
        return out;
    }

    void run() {
        while (!stop) {
            bool idle;
            {
                std::lock_guard<std::mutex> lock(mu);
                idle = running.empty();
            }
            auto fresh = queue.drain(idle ? std::chrono::microseconds(50000) : std::chrono::microseconds(0));
            std::vector<std::pair<OutputCallback*, engine::RequestOutput>> outputs;
            std::unique_lock<std::mutex> lock(mu);
            for (auto& p : fresh) {
                --queued;
                prefix_queries += p.request.prompt_ids.size();
                prefill_tokens += p.request.prompt_ids.size(); // once for all n completions
                if (aborted.erase(p.request.id)) {
                    live.erase(p.request.id);
                    p.callback(aborted_output(p.request));
                    continue;
                }
                // Seeded or greedy requests are a function of (seed, prompt, completion); others draw a
                // fresh stream.
                const engine::SamplingParams& sp = p.request.params;
                const uint64_t base = sp.seed       ? *sp.seed ^ hash_tokens(p.request.prompt_ids)
                                      : sp.greedy() ? hash_tokens(p.request.prompt_ids)
                                                    : nonce.fetch_add(0x9E3779B97F4A7C15ull);
                const size_t n = static_cast<size_t>(std::max(1, sp.n));
                Running r{std::move(p.request),   std::move(p.callback),       {},
                          std::vector<int>(n, 0), std::vector<bool>(n, false), true};
                for (size_t c = 0; c < n; ++c) r.rng.emplace_back(base + c * 0x9E3779B97F4A7C15ull);
                std::string id = r.request.id;
                running.emplace(std::move(id), std::move(r));
            }
            for (auto it = running.begin(); it != running.end();) {
                if (aborted.erase(it->first)) {
                    it->second.callback(aborted_output(it->second.request));
                    live.erase(it->first);
                    it = running.erase(it);
                    continue;
                }
                outputs.emplace_back(&it->second.callback, step_one(it->second));
                ++it;
            }
            // Callbacks run under the lock (they only push into a channel), then finished requests leave.
            for (auto& [cb, out] : outputs) (*cb)(out);
            for (auto& [cb, out] : outputs) {
                if (!out.finished) continue;
                live.erase(out.request_id);
                running.erase(out.request_id);
            }
            lock.unlock();
            if (!outputs.empty() && config.step_delay_us > 0) {
                std::this_thread::sleep_for(std::chrono::microseconds(config.step_delay_us));
            }
        }
        std::lock_guard<std::mutex> lock(mu);
        for (auto& [id, r] : running) r.callback(aborted_output(r.request));
        running.clear();
        live.clear();
    }
};

FakeBackend::FakeBackend(FakeBackendConfig config) : config_(config), impl_(std::make_unique<Impl>(config)) {}
FakeBackend::~FakeBackend() = default;

core::Result<std::vector<int32_t>> FakeBackend::tokenize(std::string_view text) const {
    if (config_.tokenize_started) config_.tokenize_started->fetch_add(1);
    if (config_.tokenizer) {
        std::vector<int32_t> ids = config_.tokenizer->encode(text);
        for (int32_t& id : ids) id %= 256;
        return ids;
    }
    std::vector<int32_t> ids;
    ids.reserve(text.size());
    for (size_t i = 0; i < text.size(); ++i) {
        if (text.compare(i, 7, "<think>") == 0) {
            ids.push_back(kThink);
            i += 6;
        } else if (text.compare(i, 8, "</think>") == 0) {
            ids.push_back(kEndThink);
            i += 7;
        } else {
            ids.push_back(static_cast<unsigned char>(text[i]));
        }
    }
    return ids;
}

core::Result<std::vector<int32_t>> FakeBackend::render_chat(const ChatPrompt& prompt) const {
    static const char* kRoles[] = {"system", "developer", "user", "assistant", "tool", "reminder"};
    std::string text;
    if (prompt.has_tools() && prompt.tool_choice != "none") {
        for (const auto& t : prompt.conversation.tools) text += "## Tool " + t.at("function").dump() + "\n";
    }
    for (const auto& m : prompt.conversation.messages) {
        text += std::string("<") + kRoles[static_cast<int>(m.role)] + ">" + m.content;
        for (const auto& tc : m.tool_calls) text += "[call " + tc.name + " " + tc.arguments + "]";
    }
    if (!prompt.response_format.is_null()) text += "<format>" + prompt.response_format.dump();
    if (prompt.add_generation_prompt) text += prompt.thinking ? "<assistant><think>" : "<assistant></think>";
    DI_ASSIGN_OR_RETURN(auto ids, tokenize(text));
    ids.insert(ids.begin(), kBos);
    return ids;
}

std::unique_ptr<IncrementalDetokenizer> FakeBackend::new_detokenizer() const {
    return std::make_unique<ByteDetokenizer>();
}

std::string FakeBackend::token_text(int32_t token) const {
    if (token >= 0 && token < 256) return std::string(1, static_cast<char>(token));
    switch (token) {
    case kBos:
        return "<bos>";
    case kEos:
        return "<eos>";
    case kThink:
        return "<think>";
    case kEndThink:
        return "</think>";
    default:
        return "<unused>";
    }
}

std::unique_ptr<OutputParser> FakeBackend::new_output_parser(const ParserOptions& options) const {
    return detail::make_dsml_parser(options);
}

core::Status FakeBackend::submit(engine::Request request, const OutputConstraint& constraint,
                                 OutputCallback callback) {
    DI_RETURN_IF_ERROR(request.params.validate(kVocab));
    std::string id = request.id;
    {
        std::lock_guard<std::mutex> lock(impl_->mu);
        if (!impl_->live.insert(id).second) return core::invalid_argument("duplicate request id " + id);
    }
    ++impl_->queued;
    if (!impl_->queue.try_push(Pending{std::move(request), std::move(callback)})) {
        --impl_->queued;
        std::lock_guard<std::mutex> lock(impl_->mu);
        impl_->live.erase(id);
        return core::resource_exhausted("the engine queue is full");
    }
    return core::Status();
}

void FakeBackend::abort(const std::string& request_id) {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (impl_->live.count(request_id)) impl_->aborted.insert(request_id);
}

EngineStats FakeBackend::stats() const {
    std::lock_guard<std::mutex> lock(impl_->mu);
    EngineStats s;
    s.running = static_cast<int>(impl_->running.size());
    s.waiting = impl_->queued.load();
    long long tokens = 0;
    for (const auto& [id, r] : impl_->running) {
        tokens += r.request.prompt_ids.size();
        for (int g : r.generated) tokens += g;
    }
    s.kv_cache_usage = static_cast<double>(tokens) / config_.kv_capacity_tokens;
    s.counters.prefix_query_tokens = static_cast<int64_t>(impl_->prefix_queries);
    s.counters.prefill_tokens = static_cast<int64_t>(impl_->prefill_tokens);
    return s;
}

int FakeBackend::live_requests() const {
    std::lock_guard<std::mutex> lock(impl_->mu);
    return static_cast<int>(impl_->running.size()) + impl_->queued.load();
}

} // namespace deepinfer::server
