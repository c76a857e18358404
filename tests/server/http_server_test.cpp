// The HTTP layer in-process: a FakeBackend behind HttpServer on a free loopback port.

#include "server/http_server.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>
#include <thread>

#include "fake_backend.h"

namespace deepinfer::server {
namespace {

using json = nlohmann::json;

class HttpServerTest : public ::testing::Test {
protected:
    void start(ServerConfig cfg = {}, FakeBackendConfig fake = {}) {
        backend_ = std::make_unique<FakeBackend>(fake);
        cfg.port = 0;
        cfg.enable_test_hooks = true;
        cfg.http_threads = 16;
        server_ = std::make_unique<HttpServer>(*backend_, cfg);
        auto port = server_->bind();
        ASSERT_TRUE(port.ok());
        port_ = *port;
        thread_ = std::thread([this] { (void)server_->serve(); });
        client_ = std::make_unique<httplib::Client>("127.0.0.1", port_);
        client_->set_read_timeout(30);
        for (int i = 0; i < 100 && !client_->Get("/health"); ++i) {
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
    }
    void TearDown() override {
        if (server_) server_->stop();
        if (thread_.joinable()) thread_.join();
    }
    httplib::Result post(const std::string& path, const json& body, httplib::Headers h = {}) {
        return client_->Post(path.c_str(), h, body.dump(), "application/json");
    }
    json chat(const std::string& text = "hi") {
        return {{"model", "fake-v4"}, {"messages", json::array({{{"role", "user"}, {"content", text}}})}};
    }
    // Splits an SSE body into its data payloads.
    static std::vector<std::string> sse_data(const std::string& body) {
        std::vector<std::string> out;
        size_t pos = 0;
        while ((pos = body.find("data: ", pos)) != std::string::npos) {
            size_t end = body.find("\n\n", pos);
            out.push_back(body.substr(pos + 6, end - pos - 6));
            pos = end;
        }
        return out;
    }
    void wait_idle() {
        for (int i = 0; i < 200 && backend_->live_requests() > 0; ++i) {
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
    }

    std::unique_ptr<FakeBackend> backend_;
    std::unique_ptr<HttpServer> server_;
    std::unique_ptr<httplib::Client> client_;
    std::thread thread_;
    int port_ = 0;
};

TEST_F(HttpServerTest, HealthModelsAndMetrics) {
    start();
    auto h = client_->Get("/health");
    ASSERT_TRUE(h);
    EXPECT_EQ(h->status, 200);
    auto m = client_->Get("/v1/models");
    ASSERT_TRUE(m);
    EXPECT_EQ(json::parse(m->body)["data"][0]["id"], "fake-v4");
    auto met = client_->Get("/metrics");
    ASSERT_TRUE(met);
    EXPECT_NE(met->body.find("deepinfer_num_requests_running"), std::string::npos);
    auto nf = client_->Get("/nope");
    ASSERT_TRUE(nf);
    EXPECT_EQ(nf->status, 404);
    EXPECT_TRUE(json::parse(nf->body).contains("error"));
}

TEST_F(HttpServerTest, ChatWithForcedToolCallOutput) {
    start();
    json body = chat();
    body["tools"] = json::array({{{"type", "function"}, {"function", {{"name", "get_weather"}}}}});
    body["chat_template_kwargs"] = {{"thinking", true}};
    body["deepinfer_test"] = {{"forced_output",
                               "hmm</think>ok<｜DSML｜invoke name=\"get_weather\">"
                               "<｜DSML｜parameter name=\"city\" string=\"true\">Paris</｜DSML｜parameter>"
                               "</｜DSML｜invoke>"}};
    auto r = post("/v1/chat/completions", body);
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    json j = json::parse(r->body);
    const json& msg = j["choices"][0]["message"];
    EXPECT_EQ(msg["reasoning_content"], "hmm");
    EXPECT_EQ(msg["reasoning"], "hmm");
    EXPECT_EQ(msg["content"], "ok");
    EXPECT_EQ(msg["tool_calls"][0]["function"]["name"], "get_weather");
    EXPECT_EQ(json::parse(msg["tool_calls"][0]["function"]["arguments"].get<std::string>())["city"], "Paris");
    EXPECT_FALSE(msg["tool_calls"][0]["id"].get<std::string>().empty());
    EXPECT_EQ(j["choices"][0]["finish_reason"], "tool_calls");
    EXPECT_GT(j["usage"]["prompt_tokens"].get<int>(), 0);
    EXPECT_EQ(j["usage"]["total_tokens"],
              j["usage"]["prompt_tokens"].get<int>() + j["usage"]["completion_tokens"].get<int>());
}

TEST_F(HttpServerTest, StreamingChatEndsWithUsageAndDone) {
    start();
    json body = chat();
    body["stream"] = true;
    body["stream_options"] = {{"include_usage", true}};
    body["max_tokens"] = 9;
    body["n"] = 2;
    body["thinking"] = false; // the output streams as content (the default, thinking, streams reasoning)
    auto r = post("/v1/chat/completions", body);
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200);
    auto data = sse_data(r->body);
    ASSERT_GE(data.size(), 4u);
    EXPECT_EQ(data.back(), "[DONE]");
    json usage = json::parse(data[data.size() - 2]);
    EXPECT_TRUE(usage["choices"].empty());
    EXPECT_EQ(usage["usage"]["completion_tokens"], 18);
    std::string text[2];
    int finishes = 0;
    for (size_t i = 0; i + 2 < data.size(); ++i) {
        json c = json::parse(data[i]);
        EXPECT_EQ(c["object"], "chat.completion.chunk");
        int idx = c["choices"][0]["index"];
        if (c["choices"][0]["delta"].contains("content")) text[idx] += c["choices"][0]["delta"]["content"];
        if (!c["choices"][0]["finish_reason"].is_null()) {
            ++finishes;
            EXPECT_EQ(c["choices"][0]["finish_reason"], "length");
        }
    }
    EXPECT_EQ(finishes, 2);
    EXPECT_EQ(text[0].size(), 9u);
    EXPECT_EQ(text[1].size(), 9u);
}

TEST_F(HttpServerTest, ErrorCodes) {
    ServerConfig cfg;
    cfg.api_key = "secret";
    FakeBackendConfig fake;
    fake.context_length = 64;
    start(cfg, fake);
    httplib::Headers auth = {{"Authorization", "Bearer secret"}};
    auto r = post("/v1/chat/completions", chat());
    EXPECT_EQ(r->status, 401);
    r = post("/v1/chat/completions", chat(), {{"Authorization", "Bearer wrong"}});
    EXPECT_EQ(r->status, 401);
    json wrong_model = chat();
    wrong_model["model"] = "gpt-9";
    r = post("/v1/chat/completions", wrong_model, auth);
    EXPECT_EQ(r->status, 404);
    EXPECT_EQ(json::parse(r->body)["error"]["code"], "model_not_found");
    r = post("/v1/chat/completions", chat(std::string(100, 'x')), auth);
    EXPECT_EQ(r->status, 400); // context overflow: 400 naming the field, with the numbers
    EXPECT_EQ(json::parse(r->body)["error"]["code"], "context_length_exceeded");
    EXPECT_EQ(json::parse(r->body)["error"]["param"], "messages");
    json big = chat();
    big["max_tokens"] = 1000;
    r = post("/v1/chat/completions", big, auth);
    EXPECT_EQ(r->status, 400);
    EXPECT_EQ(json::parse(r->body)["error"]["param"], "max_tokens");
    r = client_->Post("/v1/completions", auth, "{not json", "application/json");
    EXPECT_EQ(r->status, 400);
    EXPECT_EQ(client_->Get("/health")->status, 200); // health needs no key
}

TEST_F(HttpServerTest, FullServerAnswers429) {
    ServerConfig cfg;
    cfg.max_inflight = 1;
    FakeBackendConfig fake;
    fake.step_delay_us = 20000; // 200 tokens take ~4 s
    start(cfg, fake);
    json slow = {{"model", "fake-v4"}, {"prompt", "x"}, {"max_tokens", 200}, {"stream", true}};
    std::thread t([&] {
        httplib::Client c("127.0.0.1", port_);
        c.Post("/v1/completions", {}, slow.dump(), "application/json");
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    auto r = post("/v1/completions", {{"model", "fake-v4"}, {"prompt", "y"}});
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 429);
    EXPECT_EQ(json::parse(r->body)["error"]["code"], "rate_limit_exceeded");
    t.join();
}

TEST_F(HttpServerTest, ClientDisconnectAbortsTheRequest) {
    FakeBackendConfig fake;
    fake.step_delay_us = 5000;
    start({}, fake);
    json body = {{"model", "fake-v4"}, {"prompt", "x"}, {"max_tokens", 4000}, {"stream", true}};
    httplib::Client c("127.0.0.1", port_);
    int chunks = 0;
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/completions";
    req.body = body.dump();
    req.set_header("Content-Type", "application/json");
    req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) { return ++chunks < 3; };
    auto r = c.send(req);
    EXPECT_GE(chunks, 3);
    c.stop();
    wait_idle(); // ~2 s here; the request alone would run for ~20 s

    EXPECT_EQ(backend_->live_requests(), 0);
    auto met = client_->Get("/metrics");
    EXPECT_NE(met->body.find("status=\"499\"} 1"), std::string::npos);
}

TEST_F(HttpServerTest, ShutdownDrainsThenEndsStreamsWithAnErrorAndDone) {
    FakeBackendConfig fake;
    fake.step_delay_us = 5000;
    ServerConfig cfg;
    cfg.drain_timeout_ms = 4000;
    start(cfg, fake);
    // Two short streams finish during the drain; two long ones are cut when it times out. The long ones are
    // started first and the short ones are long enough (100 steps of 5 ms) that all four are live together
    // even on a loaded machine (with 5 tokens the short ones could finish before the long ones arrived).
    std::vector<std::string> bodies(4);
    std::vector<std::thread> clients;
    auto launch = [this, &bodies, &clients](int i) {
        clients.emplace_back([this, i, &bodies] {
            json body = {{"model", "fake-v4"},
                         {"prompt", "p" + std::to_string(i)},
                         {"stream", true},
                         {"max_tokens", i < 2 ? 100 : 3000}};
            httplib::Client c("127.0.0.1", port_);
            c.set_read_timeout(30);
            auto r = c.Post("/v1/completions", body.dump(), "application/json");
            if (r) bodies[i] = r->body;
        });
    };
    auto wait_live = [this](int n) {
        for (int i = 0; i < 2000 && backend_->live_requests() < n; ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
    };
    launch(2);
    launch(3);
    wait_live(2);
    launch(0);
    launch(1);
    wait_live(4);
    ASSERT_EQ(backend_->live_requests(), 4);
    server_->shutdown("test shutdown");
    thread_.join(); // serve() returned
    for (auto& c : clients) c.join();
    for (int i = 0; i < 4; ++i) {
        auto events = sse_data(bodies[i]);
        ASSERT_FALSE(events.empty()) << i;
        EXPECT_EQ(events.back(), "[DONE]") << i;
        bool finished = false, errored = false;
        for (size_t k = 0; k + 1 < events.size(); ++k) {
            json e = json::parse(events[k]);
            errored = errored || e.contains("error");
            if (e.contains("choices") && !e["choices"].empty())
                finished = finished || !e["choices"][0]["finish_reason"].is_null();
        }
        EXPECT_EQ(finished, i < 2) << i << ": " << bodies[i].substr(bodies[i].size() - 300);
        EXPECT_EQ(errored, i >= 2) << i;
    }
    wait_idle();
    EXPECT_EQ(backend_->live_requests(), 0);
}

TEST_F(HttpServerTest, RequestShutdownFromAnyThreadDrainsAndStopsServe) {
    start();
    ASSERT_EQ(client_->Get("/health")->status, 200);
    std::thread([this] { server_->request_shutdown("test: a fatal backend error"); }).join();
    server_->request_shutdown("a second request is a no-op");
    thread_.join(); // serve() returned: nothing was in flight, so the drain is immediate
    httplib::Client c("127.0.0.1", port_);
    c.set_connection_timeout(1);
    EXPECT_FALSE(c.Get("/health"));
}

TEST_F(HttpServerTest, WrongMethodIs405WithAllow) {
    start();
    auto r = client_->Get("/v1/chat/completions");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 405);
    EXPECT_EQ(r->get_header_value("Allow"), "POST");
    EXPECT_EQ(json::parse(r->body)["error"]["code"], "method_not_allowed");
    r = client_->Post("/v1/models", "{}", "application/json");
    EXPECT_EQ(r->status, 405);
    EXPECT_EQ(r->get_header_value("Allow"), "GET, HEAD");
    r = client_->Get("/v1/messages");
    EXPECT_EQ(r->status, 405);
    EXPECT_EQ(json::parse(r->body)["type"], "error"); // Anthropic's error shape on /v1/messages
    EXPECT_EQ(client_->Get("/v1/nothing")->status, 404);
}

TEST_F(HttpServerTest, ModelByIdVersionTokenizeDetokenize) {
    start();
    auto r = client_->Get("/v1/models/fake-v4");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(json::parse(r->body)["id"], "fake-v4");
    r = client_->Get("/v1/models/other");
    EXPECT_EQ(r->status, 404);
    EXPECT_EQ(json::parse(r->body)["error"]["code"], "model_not_found");
    r = client_->Get("/version");
    EXPECT_EQ(r->status, 200);
    EXPECT_FALSE(json::parse(r->body)["version"].get<std::string>().empty());

    r = post("/tokenize", {{"prompt", "hello"}});
    ASSERT_EQ(r->status, 200) << r->body;
    json t = json::parse(r->body);
    EXPECT_EQ(t["count"], t["tokens"].size());
    EXPECT_GT(t["count"].get<int>(), 0);
    EXPECT_EQ(t["max_model_len"], 4096);
    r = post("/detokenize", {{"tokens", t["tokens"]}});
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(json::parse(r->body)["prompt"], "hello");
    r = post("/detokenize", {{"tokens", {1, -5}}});
    EXPECT_EQ(r->status, 400);
    EXPECT_EQ(json::parse(r->body)["error"]["param"], "tokens[1]");

    // messages: the same ids a chat request renders; add_generation_prompt adds tokens.
    json m = chat();
    auto with = post("/tokenize", m);
    m["add_generation_prompt"] = false;
    auto without = post("/tokenize", m);
    ASSERT_EQ(with->status, 200) << with->body;
    ASSERT_EQ(without->status, 200) << without->body;
    EXPECT_GT(json::parse(with->body)["count"].get<int>(), json::parse(without->body)["count"].get<int>());
    r = post("/tokenize", {{"prompt", "x"}, {"model", "other"}});
    EXPECT_EQ(r->status, 404);
    r = post("/tokenize", json::object());
    EXPECT_EQ(r->status, 400);
}

TEST_F(HttpServerTest, AnthropicMessagesNonStreamingAndStreaming) {
    ServerConfig cfg;
    cfg.api_key = "secret";
    start(cfg);
    json body = {
        {"model", "fake-v4"},
        {"max_tokens", 1024}, // the fake backend spends a token per byte
        {"messages", json::array({{{"role", "user"}, {"content", "hi"}}})},
        {"tools", json::array({{{"name", "get_weather"}, {"input_schema", {{"type", "object"}}}}})},
        {"thinking", {{"type", "enabled"}, {"budget_tokens", 1024}}},
        {"deepinfer_test",
         {{"forced_output", "hmm</think>ok<｜DSML｜invoke name=\"get_weather\">"
                            "<｜DSML｜parameter name=\"city\" string=\"true\">Paris</｜DSML｜parameter>"
                            "</｜DSML｜invoke>"}}}};
    auto r = post("/v1/messages", body);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 401);
    EXPECT_EQ(json::parse(r->body)["error"]["type"], "authentication_error");
    r = post("/v1/messages", body, {{"x-api-key", "secret"}});
    ASSERT_EQ(r->status, 200) << r->body;
    json j = json::parse(r->body);
    EXPECT_EQ(j["type"], "message");
    EXPECT_EQ(j["role"], "assistant");
    ASSERT_EQ(j["content"].size(), 3u) << r->body;
    EXPECT_EQ(j["content"][0]["type"], "thinking");
    EXPECT_EQ(j["content"][0]["thinking"], "hmm");
    EXPECT_EQ(j["content"][1]["text"], "ok");
    EXPECT_EQ(j["content"][2]["type"], "tool_use");
    EXPECT_EQ(j["content"][2]["input"]["city"], "Paris");
    EXPECT_EQ(j["stop_reason"], "tool_use");
    EXPECT_GT(j["usage"]["input_tokens"].get<int>(), 0);

    body["stream"] = true;
    r = post("/v1/messages", body, {{"Authorization", "Bearer secret"}});
    ASSERT_EQ(r->status, 200) << r->body;
    auto data = sse_data(r->body);
    ASSERT_GE(data.size(), 6u);
    EXPECT_EQ(json::parse(data.front())["type"], "message_start");
    EXPECT_EQ(json::parse(data.back())["type"], "message_stop");
    json md = json::parse(data[data.size() - 2]);
    EXPECT_EQ(md["type"], "message_delta");
    EXPECT_EQ(md["delta"]["stop_reason"], "tool_use");
    EXPECT_NE(r->body.find("event: content_block_start"), std::string::npos);
    EXPECT_NE(r->body.find("input_json_delta"), std::string::npos);

    // Errors keep Anthropic's shape: max_tokens is required.
    body.erase("max_tokens");
    r = post("/v1/messages", body, {{"x-api-key", "secret"}});
    EXPECT_EQ(r->status, 400);
    EXPECT_EQ(json::parse(r->body)["error"]["type"], "invalid_request_error");
}

} // namespace
} // namespace deepinfer::server
