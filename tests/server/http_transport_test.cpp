// The HTTP transport in-process (raw sockets against HttpServer on the fake backend): slow clients cost no
// worker thread, header/body/idle deadlines, keep-alive with pipelined requests, oversized headers.

#include <arpa/inet.h>
#include <chrono>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <string>
#include <sys/socket.h>
#include <sys/time.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "fake_backend.h"
#include "server/http_server.h"

namespace deepinfer::server {
namespace {

using Clock = std::chrono::steady_clock;

class Transport : public ::testing::Test {
protected:
    void start(ServerConfig cfg) {
        backend_ = std::make_unique<FakeBackend>(FakeBackendConfig{});
        cfg.port = 0;
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
    int connect_socket(int timeout_ms = 5000) {
        int fd = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(static_cast<uint16_t>(port_));
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
        timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
        ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        return fd;
    }
    static void send_all(int fd, const std::string& s) {
        ASSERT_EQ(::send(fd, s.data(), s.size(), MSG_NOSIGNAL), static_cast<ssize_t>(s.size()));
    }
    // Everything until the server closes the connection (or the receive timeout).
    static std::string read_all(int fd) {
        std::string out;
        char buf[4096];
        for (ssize_t n; (n = ::recv(fd, buf, sizeof(buf), 0)) > 0;) out.append(buf, static_cast<size_t>(n));
        return out;
    }
    // Reads until `needle` has been seen `times` times.
    static std::string read_until(int fd, const std::string& needle, int times = 1) {
        std::string out;
        char buf[4096];
        auto count = [&] {
            int c = 0;
            for (size_t p = out.find(needle); p != std::string::npos; p = out.find(needle, p + 1)) ++c;
            return c;
        };
        while (count() < times) {
            ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
            if (n <= 0) break;
            out.append(buf, static_cast<size_t>(n));
        }
        return out;
    }
    std::string health_request() { return "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"; }

    std::unique_ptr<FakeBackend> backend_;
    std::unique_ptr<HttpServer> server_;
    std::thread thread_;
    int port_ = 0;
};

TEST_F(Transport, SlowClientsHoldNoWorker) {
    ServerConfig cfg;
    cfg.http_threads = 2; // far fewer workers than slow connections
    start(cfg);
    std::vector<int> slow;
    for (int i = 0; i < 200; ++i) {
        slow.push_back(connect_socket());
        send_all(slow.back(), "GET /health HTTP/1.1\r\nX-Slow: ");
    }
    for (int i = 0; i < 20; ++i) {
        int fd = connect_socket();
        send_all(fd, "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
        std::string r = read_all(fd);
        ::close(fd);
        EXPECT_EQ(r.rfind("HTTP/1.1 200", 0), 0u) << r;
    }
    for (int fd : slow) ::close(fd);
}

TEST_F(Transport, HeaderDeadlineAnswers408) {
    ServerConfig cfg;
    cfg.header_timeout_ms = 300;
    start(cfg);
    int fd = connect_socket();
    auto t0 = Clock::now();
    send_all(fd, "GET /health HTTP/1.1\r\nX-Slow: a");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    send_all(fd, "b"); // still trickling: the deadline counts from the first byte
    std::string r = read_all(fd);
    ::close(fd);
    EXPECT_EQ(r.rfind("HTTP/1.1 408", 0), 0u) << r;
    EXPECT_NE(r.find("request_timeout"), std::string::npos);
    EXPECT_LT(Clock::now() - t0, std::chrono::seconds(3));
}

TEST_F(Transport, IdleConnectionsAreClosedSilently) {
    ServerConfig cfg;
    cfg.keep_alive_timeout_ms = 300;
    start(cfg);
    int fresh = connect_socket();
    int used = connect_socket();
    send_all(used, health_request());
    std::string first = read_until(used, "{\"status\":\"ok\"}");
    EXPECT_EQ(first.rfind("HTTP/1.1 200", 0), 0u) << first;
    EXPECT_EQ(read_all(fresh), "");
    EXPECT_EQ(read_all(used), ""); // closed after the keep-alive timeout, no response
    ::close(fresh);
    ::close(used);
}

TEST_F(Transport, KeepAliveServesPipelinedRequestsInOrder) {
    start({});
    int fd = connect_socket();
    send_all(fd, health_request());
    EXPECT_NE(read_until(fd, "{\"status\":\"ok\"}").find("200 OK"), std::string::npos);
    // Two requests in one write, the second with a body: both answered, in order, on one connection.
    const std::string body = R"({"model":"fake-v4","prompt":"x","max_tokens":2})";
    send_all(fd, health_request() +
                     "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                     "application/json\r\nContent-Length: " +
                     std::to_string(body.size()) + "\r\n\r\n" + body + health_request());
    std::string r = read_until(fd, "HTTP/1.1 200", 3);
    r += read_until(fd, "{\"status\":\"ok\"}");
    ::close(fd);
    size_t a = r.find("\"status\":\"ok\""), b = r.find("text_completion"), c = r.rfind("\"status\":\"ok\"");
    ASSERT_NE(a, std::string::npos) << r;
    ASSERT_NE(b, std::string::npos) << r;
    EXPECT_LT(a, b);
    EXPECT_LT(b, c);
}

TEST_F(Transport, BodyDeadlineAnswers408) {
    ServerConfig cfg;
    cfg.body_timeout_ms = 300;
    start(cfg);
    int fd = connect_socket();
    send_all(fd, "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                 "Content-Length: 100\r\n\r\n{\"model\":");
    std::string r = read_all(fd);
    ::close(fd);
    EXPECT_EQ(r.rfind("HTTP/1.1 408", 0), 0u) << r;
}

TEST_F(Transport, OversizedHeaderIs431) {
    start({});
    int fd = connect_socket();
    send_all(fd, "GET /health HTTP/1.1\r\nX-Big: " + std::string(20000, 'a'));
    std::string r = read_all(fd);
    ::close(fd);
    EXPECT_EQ(r.rfind("HTTP/1.1 431", 0), 0u) << r.substr(0, 200);
}

} // namespace
} // namespace deepinfer::server
