#pragma once
// Generic HTTP/1.1 connection handling (it knows nothing of what is served). One epoll thread accepts every
// connection and holds it until its request header has fully arrived (peeked with MSG_PEEK, so nothing is
// consumed), then hands it to a worker thread, which runs cpp-httplib's request processing (routing,
// handlers, streaming) on it. A kept-alive connection comes back to the epoll thread between requests. So a
// slow or idle client costs a file descriptor, not a thread: /health and real requests keep being served with
// thousands of trickling connections open, and a thread is taken only by a request that is ready to run.
//
// Deadlines: a header must arrive within header_timeout_ms of the connection's first byte (else 408 and
// the connection is closed); a fresh connection that sends nothing, or a kept-alive one left idle, is
// closed after keep_alive_timeout_ms; a body must arrive within body_timeout_ms of its header (reads
// fail past it); any one read or write waits at most read/write_timeout_ms.

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>

#include "core/status.h"

namespace deepinfer::http {

struct TransportConfig {
    int max_workers = 512; // requests served at once (a stream holds its worker to the end)
    int header_timeout_ms = 10000;
    int keep_alive_timeout_ms = 5000;
    int body_timeout_ms = 30000;
    int read_timeout_ms = 30000;
    int write_timeout_ms = 60000;
    size_t max_header_bytes = 16384; // request line + headers; larger -> 431
    int max_requests_per_connection = 1000;
    // The body of an error the transport answers itself (408 header timeout, 431 header too large), in the
    // served protocol's shape; unset: a plain-text message.
    std::function<std::string(int status, const std::string& message, const std::string& code)> error_body;
};

// cpp-httplib's server driven by HttpTransport rather than by its own accept loop and thread pool (which
// give every connection a thread from its first byte): only its request processing is used.
class HttplibServer : public httplib::Server {
public:
    // Reads one request from `strm` (its header has arrived), routes it and writes the response.
    // connection_closed: the request asked to close the connection. False: the connection is unusable.
    bool serve_request(httplib::Stream& strm, bool close_connection, bool& connection_closed) {
        return process_request(strm, close_connection, connection_closed, nullptr);
    }
    // Binds host:port (0: any free port) with a deep listen backlog and SO_REUSEADDR only (httplib's
    // SO_REUSEPORT would let a second server share the port and take most of its connections); raises the
    // open-file limit to the hard limit, since every connection is a descriptor. Returns the port.
    core::Result<int> bind_listener(const std::string& host, int port);
    int listen_socket() const { return svr_sock_; }
    // Closes the listening socket; httplib's streaming loops (which poll for it) then end at their next
    // chunk.
    void close_listen_socket();
};

class HttpTransport {
public:
    HttpTransport(HttplibServer& http, TransportConfig config);
    ~HttpTransport();
    HttpTransport(const HttpTransport&) = delete;
    HttpTransport& operator=(const HttpTransport&) = delete;

    // Accepts and serves on http's bound listening socket until stop(); then closes the listening socket
    // (ending streams at their next chunk), closes the waiting connections and joins the workers.
    core::Status run();
    // From any thread, also before run().
    void stop();

    // Connections open (waiting for a header, queued or being served); for tests and logs.
    int open_connections() const { return open_.load(); }

    // On a worker thread, while it serves a request: true once the client has closed or reset the
    // connection (a handler doing long work before it writes checks this). False on any other thread.
    static bool client_gone();

private:
    struct Job {
        int fd = -1;
        size_t header_bytes = 0;
        long long content_length = 0; // -1: chunked (or unknown) body
        int served = 0;               // requests already served on this connection
    };
    struct Waiting;

    void accept_all(int listen_fd, int epfd, std::vector<Waiting>& waiting);
    void on_readable(int fd, int epfd, std::vector<Waiting>& waiting);
    void submit(const Job& job);
    void worker();
    void serve(const Job& job);
    void close_connection(int fd);

    HttplibServer& http_;
    TransportConfig config_;
    std::atomic<bool> stop_{false};
    std::atomic<int> open_{0};
    int wake_fd_ = -1; // eventfd: stop() and connections handed back by workers

    std::mutex mu_; // guards the fields below
    std::condition_variable cv_;
    std::deque<Job> jobs_;
    std::vector<Job> returned_; // kept-alive connections for the epoll thread to wait on again
    std::vector<std::thread> workers_;
    int idle_workers_ = 0;
    bool workers_stop_ = false;
};

} // namespace deepinfer::http
