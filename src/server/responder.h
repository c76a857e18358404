#pragma once
// Drives one admitted generation request from httplib's chunked content provider: polls the
// Generation, hands each choice's output to the endpoint (chat or completions) to render, writes it, and
// keeps idle connections probed with heartbeats so that a client that went away is noticed and its
// request aborted (freeing its KV). Non-streaming responses are sent the same way, with whitespace
// heartbeats before the JSON body.

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "server/generation.h"
#include "server/response_builder.h"
#include "server/server_state.h"

namespace deepinfer::server {

class Responder : public std::enable_shared_from_this<Responder> {
public:
    Responder(HttpServer::State& s, std::string endpoint, std::unique_ptr<Generation> gen, ResponseMeta meta,
              bool stream, bool include_usage, int prompt_tokens);
    virtual ~Responder() = default;

    // Registers the content provider and releaser on `res`.
    void attach(httplib::Response& res);

protected:
    virtual std::string prelude() { return {}; }
    virtual void on_output(int choice, ChoiceOutput& out, std::string& buf) = 0;
    // The last bytes: the JSON body, or the usage chunk and [DONE].
    virtual std::string finale() = 0;

    Usage usage() const;
    const TokenText& token_text() const { return token_text_; }
    std::string error_event() const;
    // The OpenAI finale: the JSON `body()` (or the error object), or when streaming the error event if any,
    // the usage chunk (an object of `chunk_object`) when asked for, and [DONE].
    std::string openai_finale(const std::function<json()>& body, const char* chunk_object);

    HttpServer::State& s_;
    std::string endpoint_;
    std::unique_ptr<Generation> gen_;
    ResponseMeta meta_;
    bool stream_;
    bool include_usage_;
    int prompt_tokens_;  // unique prompt tokens (n > 1 counts a prompt once)
    core::Status error_; // first engine error

private:
    bool step(httplib::DataSink& sink);
    void on_release(bool success);

    TokenText token_text_;
    std::chrono::steady_clock::time_point start_;
    std::chrono::steady_clock::time_point last_write_;
    std::vector<std::chrono::steady_clock::time_point> last_token_;
    bool first_token_seen_ = false;
    bool started_ = false;
    bool completed_ = false;
};

// Admits `spec` (429 when the server is full) and starts it as one engine request; fills meta (an id from
// id_prefix, created now) and counts its prompt tokens. Nullptr once the error was sent.
std::unique_ptr<Generation> start_generation(HttpServer::State& s, const char* endpoint,
                                             const char* id_prefix, GenerationSpec spec, int prompt_tokens,
                                             ResponseMeta& meta, httplib::Response& res);

// The chat pipeline up to a started Generation, for chat completions and /v1/messages alike: the request
// checks, the prompt rendered and tokenized, max_tokens resolved, then start_generation(). n_prompt: the
// prompt's tokens. Nullptr once the error was sent.
std::unique_ptr<Generation> start_chat_generation(HttpServer::State& s, const char* endpoint,
                                                  const char* id_prefix, ChatRequest& r, ResponseMeta& meta,
                                                  int& n_prompt, httplib::Response& res);

} // namespace deepinfer::server
