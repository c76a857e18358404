#include "server/fake_backend.h"

#include <cmath>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <utility>

#include "server/engine_backend_text.h"
#include "server/request_queue.h"
#include "server/utf8.h"

namespace deepinfer::server {

namespace {

struct Pending {
    GenerationRequest request;
    DeltaCallback callback;
};

struct Running {
    GenerationRequest request;
    DeltaCallback callback;
    std::mt19937_64 rng;
    int generated = 0;
    std::vector<int32_t> history;
};

class ByteDetokenizer : public IncrementalDetokenizer {
public:
    std::string push(int32_t token) override {
        if (token == FakeBackend::kThink) return flush() + "<think>";
        if (token == FakeBackend::kEndThink) return flush() + "</think>";
        if (token < 0 || token > 255) return std::string(); // BOS/EOS and unused ids render as nothing
        pending_.push_back(static_cast<char>(token));
        size_t hold = incomplete_utf8_tail(pending_);
        std::string out = valid_utf8(std::string_view(pending_).substr(0, pending_.size() - hold));
        pending_.erase(0, pending_.size() - hold);
        return out;
    }
    std::string flush() override { return valid_utf8(std::exchange(pending_, std::string())); }

private:
    std::string pending_;
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

    int32_t sample(Running& r) {
        const SamplingOptions& s = r.request.sampling;
        for (const auto& [tok, bias] : s.logit_bias) {
            if (bias >= 100.0) return tok; // a +100 bias makes a token certain
        }
        if (config.eos_probability > 0 &&
            std::uniform_real_distribution<double>(0, 1)(r.rng) < config.eos_probability) {
            return kEos;
        }
        static const char kAlphabet[] = "abcdefghijklmnopqrstuvwxyz      .,";
        for (;;) {
            int32_t t = static_cast<unsigned char>(kAlphabet[r.rng() % (sizeof(kAlphabet) - 1)]);
            auto it = s.logit_bias.find(t);
            if (it == s.logit_bias.end() || it->second > -100.0) return t; // -100 bans a token
        }
    }

    void step_one(Running& r, std::vector<std::pair<DeltaCallback*, GenerationDelta>>& out) {
        GenerationDelta d;
        if (r.generated == 0) {
            d.prompt_tokens = static_cast<int>(r.request.prompt_tokens.size());
            d.cached_prompt_tokens = 0;
        }
        int32_t t = sample(r);
        ++r.generated;
        if (t == kEos) {
            d.finish = FinishReason::kStop;
        } else {
            d.tokens.push_back(t);
            r.history.push_back(t);
            if (r.request.sampling.top_logprobs >= 0) {
                TokenLogprob lp{t, -0.5 - static_cast<double>(r.rng() % 1000) / 1000.0, {}};
                lp.top.push_back({t, lp.logprob});
                for (int k = 1; k < r.request.sampling.top_logprobs; ++k) {
                    lp.top.push_back({static_cast<int32_t>('a' + (t + k) % 26), lp.logprob - k});
                }
                d.logprobs.push_back(std::move(lp));
            }
            int total = static_cast<int>(r.request.prompt_tokens.size()) + r.generated;
            if (r.generated >= r.request.sampling.max_tokens || total >= config.context_length) {
                d.finish = FinishReason::kLength;
            }
        }
        out.emplace_back(&r.callback, std::move(d));
    }

    void run() {
        while (!stop) {
            bool idle;
            {
                std::lock_guard<std::mutex> lock(mu);
                idle = running.empty();
            }
            auto fresh = queue.drain(idle ? std::chrono::microseconds(50000) : std::chrono::microseconds(0));
            std::vector<std::pair<DeltaCallback*, GenerationDelta>> deltas;
            std::vector<DeltaCallback> finished_callbacks;
            std::unique_lock<std::mutex> lock(mu);
            for (auto& p : fresh) {
                --queued;
                prefix_queries += p.request.prompt_tokens.size();
                // Seeded or greedy requests are a function of (seed, prompt); others draw a fresh stream.
                const SamplingOptions& sp = p.request.sampling;
                uint64_t seed = sp.seed                 ? *sp.seed ^ hash_tokens(p.request.prompt_tokens)
                                : sp.temperature == 0.0 ? hash_tokens(p.request.prompt_tokens)
                                                        : nonce.fetch_add(0x9E3779B97F4A7C15ull);
                if (aborted.erase(p.request.id)) {
                    live.erase(p.request.id);
                    GenerationDelta d;
                    d.finish = FinishReason::kAbort;
                    p.callback(std::move(d));
                    continue;
                }
                std::string id = p.request.id;
                running.emplace(
                    id, Running{std::move(p.request), std::move(p.callback), std::mt19937_64(seed), 0, {}});
            }
            for (auto it = running.begin(); it != running.end();) {
                if (aborted.erase(it->first)) {
                    GenerationDelta d;
                    d.finish = FinishReason::kAbort;
                    it->second.callback(std::move(d));
                    live.erase(it->first);
                    it = running.erase(it);
                    continue;
                }
                step_one(it->second, deltas);
                ++it;
            }
            // Callbacks run under the lock (they only push into a channel), then finished requests leave.
            for (auto& [cb, d] : deltas) (*cb)(d);
            for (auto it = running.begin(); it != running.end();) {
                bool done = false;
                for (auto& [cb, d] : deltas)
                    done = done || (cb == &it->second.callback && d.finish != FinishReason::kNone);
                if (done) live.erase(it->first);
                it = done ? running.erase(it) : std::next(it);
            }
            lock.unlock();
            if (!deltas.empty() && config.step_delay_us > 0) {
                std::this_thread::sleep_for(std::chrono::microseconds(config.step_delay_us));
            }
        }
        std::lock_guard<std::mutex> lock(mu);
        for (auto& [id, r] : running) {
            GenerationDelta d;
            d.finish = FinishReason::kAbort;
            r.callback(std::move(d));
        }
        running.clear();
        live.clear();
    }
};

FakeBackend::FakeBackend(FakeBackendConfig config) : config_(config), impl_(std::make_unique<Impl>(config)) {}
FakeBackend::~FakeBackend() = default;

core::Result<std::vector<int32_t>> FakeBackend::tokenize(std::string_view text) const {
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
    std::string text;
    for (const auto& t : prompt.tools)
        text += "## Tool " + t.name + ": " + t.description + " " + t.parameters_json + "\n";
    for (const auto& m : prompt.messages) {
        text += "<" + m.role + ">" + m.content;
        for (const auto& tc : m.tool_calls) text += "[call " + tc.name + " " + tc.arguments + "]";
    }
    if (!prompt.response_format_json.empty()) text += "<format>" + prompt.response_format_json;
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

core::Status FakeBackend::submit(GenerationRequest request, DeltaCallback callback) {
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
    for (const auto& [id, r] : impl_->running) tokens += r.request.prompt_tokens.size() + r.generated;
    s.kv_cache_usage = static_cast<double>(tokens) / config_.kv_capacity_tokens;
    s.prefix_cache_queries = impl_->prefix_queries;
    return s;
}

int FakeBackend::live_requests() const {
    std::lock_guard<std::mutex> lock(impl_->mu);
    return static_cast<int>(impl_->running.size()) + impl_->queued.load();
}

} // namespace deepinfer::server
