// Tokenization off the HTTP workers (issue 13): the bounded, cancellable work pool (http/work_pool.h), the
// tokenizer's
// cancel hook, and what they buy over HTTP on loopback: a client that leaves stops its prompt's CPU cost,
// and /health answers while a 30 MiB prompt tokenizes.

#include "http/work_pool.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <thread>

#include "fake_backend.h"
#include "server/http_server.h"
#include "tokenizer/cancel.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::server {
namespace {

using Clock = std::chrono::steady_clock;

std::shared_ptr<const tokenizer::Tokenizer> v4_tokenizer() {
    static std::shared_ptr<const tokenizer::Tokenizer> tok = [] {
        auto r = tokenizer::Tokenizer::from_file(std::string(DEEPINFER_SOURCE_DIR) +
                                                 "/data/tokenizer/deepseek-v4/tokenizer.json");
        return r.ok() ? std::make_shared<const tokenizer::Tokenizer>(std::move(r).value()) : nullptr;
    }();
    return tok;
}

// Text the tokenizer spends real time on: pseudo-random lower-case words (3-10 letters, so nearly every word
// misses the BPE word cache and is merged from its bytes), numbers and punctuation; no special tokens.
// Repeating a small vocabulary of words instead made the cost depend on the cache and tokenizing 30 MiB fit
// inside the 30 MiB test's deadline on a quiet machine.
std::string prose(size_t bytes) {
    std::string s;
    s.reserve(bytes + 64);
    uint64_t x = 0x9E3779B97F4A7C15ull;
    auto next = [&x] {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        return x;
    };
    for (int i = 0; s.size() < bytes; ++i) {
        const int len = 3 + static_cast<int>(next() % 8);
        for (int k = 0; k < len; ++k) s += static_cast<char>('a' + next() % 26);
        s += (i % 7 == 6) ? ", " + std::to_string(next() % 1000) + ". " : " ";
    }
    s.resize(bytes);
    return s;
}

double cpu_seconds() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

using http::WorkPool;

// Runs until its cancel flag is set.
void spin_until_cancelled(const std::atomic<bool>& cancel) {
    while (!cancel) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

TEST(WorkPool, RunsWorkAndCutsItForAGoneClientADeadlineOrAFullQueue) {
    WorkPool pool(1, 1);
    const auto far = Clock::now() + std::chrono::seconds(30);
    int ran = 0;
    WorkPool::Work count = [&](const std::atomic<bool>&) { ++ran; };
    EXPECT_EQ(pool.run(count, far, {}), WorkPool::Outcome::kDone);
    EXPECT_EQ(ran, 1);

    WorkPool::Work spin = spin_until_cancelled;
    std::atomic<bool> gone{false};
    std::thread leaver([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        gone = true;
    });
    EXPECT_EQ(pool.run(spin, far, [&] { return gone.load(); }), WorkPool::Outcome::kClientGone);
    leaver.join();
    EXPECT_EQ(pool.run(spin, Clock::now() + std::chrono::milliseconds(100), {}),
              WorkPool::Outcome::kDeadline);
    EXPECT_EQ(pool.cancelled(), 2u);

    // One thread busy, one job queued: a third is refused at once, and the queued one, cancelled before it
    // starts, returns at once (the thread is still busy) and never runs.
    std::atomic<bool> release{false};
    WorkPool::Outcome busy_outcome = WorkPool::Outcome::kDone;
    std::thread busy([&] { busy_outcome = pool.run(spin, far, [&] { return release.load(); }); });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::atomic<bool> queued_gone{false};
    std::thread queued([&] {
        EXPECT_EQ(pool.run(count, far, [&] { return queued_gone.load(); }), WorkPool::Outcome::kClientGone);
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_EQ(pool.run(count, far, {}), WorkPool::Outcome::kQueueFull);
    queued_gone = true;
    queued.join();
    release = true;
    busy.join();
    EXPECT_EQ(busy_outcome, WorkPool::Outcome::kClientGone); // not its 30 s deadline: nothing waited on it
    EXPECT_EQ(ran, 1);

    pool.stop();
    EXPECT_EQ(pool.run(count, far, {}), WorkPool::Outcome::kStopping);
}

TEST(TokenizerCancel, ASetFlagStopsAHugeEncodeEarly) {
    auto tok = v4_tokenizer();
    ASSERT_NE(tok, nullptr);
    const std::string text = prose(2u << 20);
    const size_t full = tok->encode(text).size();
    std::atomic<bool> cancel{true};
    tokenizer::CancelScope scope(&cancel);
    const size_t cut = tok->encode(text).size();
    EXPECT_GT(full, 250000u);
    EXPECT_LT(cut, full / 10) << "the encode ran on past its cancel flag";
    cancel = false;
    EXPECT_EQ(tok->encode(text).size(), full) << "an unset flag changes nothing";
}

class TokenizeOffloadHttpTest : public ::testing::Test {
protected:
    void start(ServerConfig cfg) {
        auto tok = v4_tokenizer();
        ASSERT_NE(tok, nullptr);
        FakeBackendConfig fake;
        fake.context_length = 1 << 26; // so a 30 MiB prompt is tokenized rather than refused by its size
        fake.tokenizer = tok;
        fake.tokenize_started = &tokenize_started_;
        backend_ = std::make_unique<FakeBackend>(fake);
        cfg.port = 0;
        cfg.http_threads = 16;
        cfg.tokenize_threads = 1;
        server_ = std::make_unique<HttpServer>(*backend_, cfg);
        auto port = server_->bind();
        ASSERT_TRUE(port.ok());
        port_ = *port;
        thread_ = std::thread([this] { (void)server_->serve(); });
    }
    void TearDown() override {
        if (server_) server_->stop();
        if (thread_.joinable()) thread_.join();
    }
    static std::string completion_body(size_t prompt_bytes) {
        return nlohmann::json{{"model", "fake-v4"}, {"prompt", prose(prompt_bytes)}, {"max_tokens", 1}}
            .dump();
    }
    long long metric(const std::string& name) {
        httplib::Client c("127.0.0.1", port_);
        auto r = c.Get("/metrics");
        if (!r) return -1;
        size_t at = r->body.find("\n" + name + " ");
        return at == std::string::npos ? -1 : std::stoll(r->body.substr(at + name.size() + 2));
    }

    std::atomic<int> tokenize_started_{0};
    std::unique_ptr<FakeBackend> backend_;
    std::unique_ptr<HttpServer> server_;
    std::thread thread_;
    int port_ = 0;
};

TEST_F(TokenizeOffloadHttpTest, AClientThatDisconnectsStopsCostingCpu) {
    start({});
    const std::string body = completion_body(20u << 20); // ~6 s of one core to tokenize, whole
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port_));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    const std::string req =
        "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        "Content-Length: " +
        std::to_string(body.size()) + "\r\n\r\n" + body;
    for (size_t off = 0; off < req.size();) {
        ssize_t n = ::send(fd, req.data() + off, req.size() - off, MSG_NOSIGNAL);
        ASSERT_GT(n, 0);
        off += static_cast<size_t>(n);
    }
    // Wait until the tokenizer is under way (the body's receipt and JSON parse come first, and under a
    // sanitizer they alone can take seconds of CPU), then let it burn some CPU.
    const auto give_up = Clock::now() + std::chrono::seconds(120);
    while (tokenize_started_.load() == 0 && Clock::now() < give_up)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ASSERT_EQ(tokenize_started_.load(), 1) << "the prompt never reached the tokenizer";
    const double cpu0 = cpu_seconds();
    while (cpu_seconds() - cpu0 < 0.3 && Clock::now() < give_up)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ASSERT_EQ(metric("deepinfer_tokenize_cancelled_total"), 0) << "the prompt was refused before tokenizing";
    ::close(fd);
    long long cancelled = 0;
    for (auto until = Clock::now() + std::chrono::seconds(20); Clock::now() < until && cancelled < 1;) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        cancelled = metric("deepinfer_tokenize_cancelled_total");
    }
    EXPECT_EQ(cancelled, 1) << "the disconnect did not stop the tokenization";
    // With the work stopped, an idle second costs next to no CPU (tokenizing on would cost ~1 s of it).
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const double idle0 = cpu_seconds();
    std::this_thread::sleep_for(std::chrono::seconds(1));
    const double idle_cpu = cpu_seconds() - idle0;
    std::printf("CPU in the second after the disconnect: %.3f s\n", idle_cpu);
    EXPECT_LT(idle_cpu, 0.3);
}

TEST_F(TokenizeOffloadHttpTest, HealthAnswersWhileA30MiBPromptTokenizesAndItsDeadlineStopsIt) {
    ServerConfig cfg;
    cfg.tokenize_timeout_ms = 1500;
    start(cfg);
    const std::string body = completion_body(30u << 20);
    std::atomic<bool> done{false};
    std::optional<httplib::Result> big;
    double big_seconds = 0;
    std::thread client([&] {
        httplib::Client c("127.0.0.1", port_);
        c.set_read_timeout(120);
        c.set_write_timeout(120);
        const auto t0 = Clock::now();
        big.emplace(c.Post("/v1/completions", body, "application/json"));
        big_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
        done = true;
    });
    httplib::Client probe("127.0.0.1", port_);
    probe.set_connection_timeout(2);
    probe.set_read_timeout(2);
    int probes = 0, ok = 0;
    double worst = 0;
    while (!done) {
        const auto t0 = Clock::now();
        auto r = probe.Get("/health");
        worst = std::max(worst, std::chrono::duration<double>(Clock::now() - t0).count());
        ++probes;
        if (r && r->status == 200) ++ok;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    client.join();
    std::printf("/health: %d probes while the 30 MiB prompt tokenized, worst %.1f ms; the prompt's 503 after "
                "%.2f s\n",
                probes, worst * 1e3, big_seconds);
    EXPECT_GE(probes, 10);
    EXPECT_EQ(ok, probes) << "/health failed while a prompt tokenized (worst " << worst << " s)";
    ASSERT_TRUE(big && *big);
    EXPECT_EQ((*big)->status, 503) << (*big)->body;
    EXPECT_NE((*big)->body.find("within 1500 ms"), std::string::npos) << (*big)->body;
    // Bound loose enough for sanitizer builds; tokenizing all 30 MiB would take ~9 s of CPU here, ~10x that
    // under TSan.
    EXPECT_LT(big_seconds, 60.0) << "the deadline did not stop the tokenization";
    EXPECT_EQ(metric("deepinfer_tokenize_cancelled_total"), 1);
}

} // namespace
} // namespace deepinfer::server
