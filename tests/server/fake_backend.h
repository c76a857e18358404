#pragma once
// A deterministic stand-in for the engine and tokenizer, for the server tests and the test tree's
// `deepinfer-fake serve --backend fake` (never linked into the product binary). Byte-level tokenizer (token =
// byte, plus a few specials); an engine loop thread that takes requests from a bounded queue and emits one
// pseudo-random token per running request per step, seeded by (seed, prompt) so seeded requests reproduce; a
// toy prompt renderer; the DSML parser.

#include <atomic>
#include <memory>
#include <thread>

#include "server/backend.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::server {

struct FakeBackendConfig {
    std::string model_name = "fake-v4";
    int context_length = 4096;
    int max_queue = 512;      // submissions waiting for the engine loop; beyond -> ResourceExhausted
    int step_delay_us = 1000; // simulated time per engine step
    int kv_capacity_tokens = 1 << 20;
    double eos_probability = 0.0; // chance per token to end with EOS (finish "stop")
    // Set: tokenize() runs this real tokenizer (ids folded into the fake vocabulary), for tests of what
    // tokenizing a huge prompt costs.
    std::shared_ptr<const tokenizer::Tokenizer> tokenizer;
    // Set: counts the tokenize() calls that have started (a test waits for the work to be under way).
    std::atomic<int>* tokenize_started = nullptr;
};

class FakeBackend : public Backend {
public:
    static constexpr int32_t kBos = 256, kEos = 257, kThink = 258, kEndThink = 259, kVocab = 320;

    explicit FakeBackend(FakeBackendConfig config = {});
    ~FakeBackend() override;

    std::string model_name() const override { return config_.model_name; }
    int context_length() const override { return config_.context_length; }
    int vocab_size() const override { return kVocab; }
    core::Result<std::vector<int32_t>> render_chat(const ChatPrompt& prompt) const override;
    core::Result<std::vector<int32_t>> tokenize(std::string_view text) const override;
    std::unique_ptr<IncrementalDetokenizer> new_detokenizer() const override;
    std::string token_text(int32_t token) const override;
    std::unique_ptr<OutputParser> new_output_parser(const ParserOptions& options) const override;
    core::Status submit(engine::Request request, const OutputConstraint& constraint,
                        OutputCallback callback) override;
    void abort(const std::string& request_id) override;
    EngineStats stats() const override;

    // Requests the engine loop holds (running or queued); 0 after everything finished or was aborted.
    int live_requests() const;

    struct Impl;

private:
    FakeBackendConfig config_;
    std::unique_ptr<Impl> impl_;
};

} // namespace deepinfer::server
