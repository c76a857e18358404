#include "http/transport.h"

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string_view>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/logging.h"

namespace deepinfer::http {

namespace {
using Clock = std::chrono::steady_clock;

int ms_until(Clock::time_point deadline) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    return static_cast<int>(std::clamp<long long>(left, 0, 1 << 30));
}

// Waits for `events` on fd up to timeout_ms; true when ready (or the peer hung up, which the following
// read or write reports).
bool wait_for(int fd, short events, int timeout_ms) {
    pollfd p{fd, events, 0};
    for (;;) {
        int r = ::poll(&p, 1, timeout_ms);
        if (r > 0) return true;
        if (r == 0 || errno != EINTR) return false;
    }
}

void ip_and_port(const sockaddr_storage& a, std::string& ip, int& port) {
    char buf[INET6_ADDRSTRLEN] = {};
    if (a.ss_family == AF_INET) {
        const auto& v4 = reinterpret_cast<const sockaddr_in&>(a);
        inet_ntop(AF_INET, &v4.sin_addr, buf, sizeof(buf));
        port = ntohs(v4.sin_port);
    } else if (a.ss_family == AF_INET6) {
        const auto& v6 = reinterpret_cast<const sockaddr_in6&>(a);
        inet_ntop(AF_INET6, &v6.sin6_addr, buf, sizeof(buf));
        port = ntohs(v6.sin6_port);
    }
    ip = buf;
}

// httplib's Stream over a connection whose header the epoll thread has seen arrive. Reads of the header
// are buffered (its length is known, so the buffer never takes bytes of the body or of a next request);
// reads after it go straight to the socket with the caller's size (httplib asks for exactly what the body
// has left), so the connection can be kept alive with nothing lost. Reads stop at the body deadline.
class ConnectionStream : public httplib::Stream {
public:
    ConnectionStream(int fd, size_t header_bytes, const TransportConfig& c)
        : fd_(fd), header_left_(header_bytes), read_timeout_ms_(c.read_timeout_ms),
          write_timeout_ms_(c.write_timeout_ms),
          body_deadline_(Clock::now() + std::chrono::milliseconds(c.body_timeout_ms)) {}

    bool is_readable() const override {
        if (off_ < len_) return true;
        return wait_for(fd_, POLLIN, std::min(read_timeout_ms_, ms_until(body_deadline_))) &&
               Clock::now() < body_deadline_;
    }
    bool is_writable() const override { return wait_for(fd_, POLLOUT, write_timeout_ms_); }

    ssize_t read(char* ptr, size_t size) override {
        if (off_ < len_) {
            size_t n = std::min(size, len_ - off_);
            std::memcpy(ptr, buf_ + off_, n);
            off_ += n;
            return static_cast<ssize_t>(n);
        }
        const bool in_header = header_left_ > 0;
        char* dst = in_header ? buf_ : ptr;
        const size_t want = in_header ? std::min(sizeof(buf_), header_left_) : size;
        for (;;) {
            ssize_t n = ::recv(fd_, dst, want, 0);
            if (n < 0 && (errno == EINTR)) continue;
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                if (!is_readable()) return -1;
                continue;
            }
            if (n <= 0) return n;
            if (!in_header) {
                body_read_ += static_cast<size_t>(n);
                return n;
            }
            header_left_ -= static_cast<size_t>(n);
            off_ = 0;
            len_ = static_cast<size_t>(n);
            return read(ptr, size);
        }
    }

    ssize_t write(const char* ptr, size_t size) override {
        for (;;) {
            ssize_t n = ::send(fd_, ptr, size, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (n >= 0) return n;
            if (errno == EINTR) continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK) return -1;
            pollfd p{fd_, POLLOUT, 0};
            int r = ::poll(&p, 1, write_timeout_ms_);
            if (r <= 0 && !(r < 0 && errno == EINTR)) return -1;
        }
    }

    void get_remote_ip_and_port(std::string& ip, int& port) const override {
        sockaddr_storage a{};
        socklen_t len = sizeof(a);
        if (::getpeername(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0) ip_and_port(a, ip, port);
    }
    void get_local_ip_and_port(std::string& ip, int& port) const override {
        sockaddr_storage a{};
        socklen_t len = sizeof(a);
        if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0) ip_and_port(a, ip, port);
    }
    socket_t socket() const override { return fd_; }

    size_t body_read() const { return body_read_; }
    bool header_consumed() const { return header_left_ == 0 && off_ == len_; }

private:
    int fd_;
    size_t header_left_; // header bytes not yet taken from the socket
    int read_timeout_ms_, write_timeout_ms_;
    Clock::time_point body_deadline_;
    char buf_[4096];
    size_t off_ = 0, len_ = 0; // unread header bytes in buf_
    size_t body_read_ = 0;
};

// Where the header ends (the byte after its blank line), or 0 while it is incomplete.
size_t header_end(std::string_view s) {
    size_t crlf = s.find("\r\n\r\n");
    size_t lf = s.find("\n\n");
    size_t end = std::min(crlf == std::string_view::npos ? crlf : crlf + 4,
                          lf == std::string_view::npos ? lf : lf + 2);
    return end == std::string_view::npos ? 0 : end;
}

bool iequals_prefix(std::string_view line, std::string_view name) {
    if (line.size() < name.size()) return false;
    for (size_t i = 0; i < name.size(); ++i)
        if (std::tolower(static_cast<unsigned char>(line[i])) != name[i]) return false;
    return true;
}

// The body length the header announces: 0 when none, -1 when chunked or unparseable (such a connection
// is not kept alive: whether the handler read the whole body is unknown).
long long body_length(std::string_view header) {
    long long length = 0;
    size_t pos = 0;
    while (pos < header.size()) {
        size_t eol = header.find('\n', pos);
        std::string_view line = header.substr(pos, eol == std::string_view::npos ? eol : eol - pos);
        pos = eol == std::string_view::npos ? header.size() : eol + 1;
        if (iequals_prefix(line, "transfer-encoding:")) return -1;
        if (iequals_prefix(line, "content-length:")) {
            std::string v(line.substr(15));
            char* end = nullptr;
            long long n = std::strtoll(v.c_str(), &end, 10);
            while (end && (*end == ' ' || *end == '\t' || *end == '\r')) ++end;
            if (!end || *end != '\0' || n < 0) return -1;
            length = n;
        }
    }
    return length;
}

// A best-effort error response on a connection about to be closed (the socket is non-blocking).
void send_error_and_close(const TransportConfig& c, int fd, int status, const char* reason,
                          const std::string& message, const char* code) {
    const bool shaped = static_cast<bool>(c.error_body);
    std::string body = shaped ? c.error_body(status, message, code) : message + "\n";
    std::string head = "HTTP/1.1 " + std::to_string(status) + " " + reason +
                       "\r\nContent-Type: " + (shaped ? "application/json" : "text/plain") +
                       "\r\nConnection: close\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n";
    std::string all = head + body;
    (void)::send(fd, all.data(), all.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    ::shutdown(fd, SHUT_WR);
}
} // namespace

core::Result<int> HttplibServer::bind_listener(const std::string& host, int port) {
    rlimit fds{};
    if (getrlimit(RLIMIT_NOFILE, &fds) == 0 && fds.rlim_cur < fds.rlim_max) {
        fds.rlim_cur = fds.rlim_max;
        setrlimit(RLIMIT_NOFILE, &fds);
    }
    // httplib listens with a backlog of 5, which resets connections when hundreds arrive at once: catch the
    // listening socket as it is created and listen again with a deep backlog.
    auto reuse_addr = [](socket_t sock) {
        int yes = 1;
        setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    };
    int listen_fd = -1;
    set_socket_options([&](socket_t sock) {
        reuse_addr(sock);
        if (listen_fd < 0) listen_fd = sock;
    });
    if (port == 0) {
        port = bind_to_any_port(host);
        if (port < 0) return core::unavailable("cannot bind " + host + " to a free port");
    } else if (!bind_to_port(host, port)) {
        return core::unavailable("cannot bind " + host + ":" + std::to_string(port) +
                                 " (is another server using the port?)");
    }
    set_socket_options(reuse_addr);
    if (listen_fd >= 0 && ::listen(listen_fd, 4096) != 0) return core::unavailable("listen() failed");
    return port;
}

void HttplibServer::close_listen_socket() {
    int sock = svr_sock_.exchange(INVALID_SOCKET);
    if (sock != INVALID_SOCKET) {
        ::shutdown(sock, SHUT_RDWR);
        ::close(sock);
    }
}

struct HttpTransport::Waiting {
    bool active = false;
    bool started = false; // some bytes of the next header arrived
    int served = 0;
    Clock::time_point deadline;
};

HttpTransport::HttpTransport(HttplibServer& http, TransportConfig config) : http_(http), config_(config) {
    wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
}

HttpTransport::~HttpTransport() {
    if (wake_fd_ >= 0) ::close(wake_fd_);
}

void HttpTransport::stop() {
    stop_ = true;
    uint64_t one = 1;
    if (wake_fd_ >= 0) (void)!::write(wake_fd_, &one, sizeof(one));
}

void HttpTransport::close_connection(int fd) {
    ::close(fd);
    --open_;
}

core::Status HttpTransport::run() {
    const int listen_fd = http_.listen_socket();
    if (listen_fd < 0 || wake_fd_ < 0) return core::unavailable("the HTTP server is not bound");
    ::fcntl(listen_fd, F_SETFL, ::fcntl(listen_fd, F_GETFL) | O_NONBLOCK);
    const int epfd = ::epoll_create1(EPOLL_CLOEXEC);
    if (epfd < 0) return core::unavailable(std::string("epoll_create1: ") + std::strerror(errno));
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = listen_fd;
    ::epoll_ctl(epfd, EPOLL_CTL_ADD, listen_fd, &ev);
    ev.data.fd = wake_fd_;
    ::epoll_ctl(epfd, EPOLL_CTL_ADD, wake_fd_, &ev);

    std::vector<Waiting> waiting; // by file descriptor
    std::vector<epoll_event> events(512);
    auto next_sweep = Clock::now();
    Clock::time_point accept_resume{};
    bool accept_paused = false;
    while (!stop_) {
        int n = ::epoll_wait(epfd, events.data(), static_cast<int>(events.size()), 100);
        if (n < 0 && errno != EINTR) {
            DI_LOG(Error) << "epoll_wait: " << std::strerror(errno);
            break;
        }
        for (int i = 0; i < n; ++i) {
            const int fd = events[i].data.fd;
            if (fd == listen_fd) {
                accept_all(listen_fd, epfd, waiting);
                if (errno == EMFILE || errno == ENFILE) { // out of descriptors: retry in a while
                    epoll_event off{};
                    off.data.fd = listen_fd;
                    ::epoll_ctl(epfd, EPOLL_CTL_MOD, listen_fd, &off);
                    accept_paused = true;
                    accept_resume = Clock::now() + std::chrono::milliseconds(100);
                }
            } else if (fd == wake_fd_) {
                uint64_t v;
                (void)!::read(wake_fd_, &v, sizeof(v));
                std::vector<Job> back;
                {
                    std::lock_guard<std::mutex> lock(mu_);
                    back.swap(returned_);
                }
                for (const Job& j : back) {
                    if (static_cast<size_t>(j.fd) >= waiting.size()) waiting.resize(j.fd + 1);
                    waiting[j.fd] = {true, false, j.served,
                                     Clock::now() + std::chrono::milliseconds(config_.keep_alive_timeout_ms)};
                    epoll_event e{};
                    e.events = EPOLLIN | EPOLLRDHUP;
                    e.data.fd = j.fd;
                    ::epoll_ctl(epfd, EPOLL_CTL_ADD, j.fd, &e);
                    on_readable(j.fd, epfd, waiting); // a pipelined next request may be there already
                }
            } else {
                on_readable(fd, epfd, waiting);
            }
        }
        const auto now = Clock::now();
        if (accept_paused && now >= accept_resume) {
            epoll_event on{};
            on.events = EPOLLIN;
            on.data.fd = listen_fd;
            ::epoll_ctl(epfd, EPOLL_CTL_MOD, listen_fd, &on);
            accept_paused = false;
        }
        if (now >= next_sweep) { // deadlines, at 100 ms granularity
            next_sweep = now + std::chrono::milliseconds(100);
            for (size_t fd = 0; fd < waiting.size(); ++fd) {
                Waiting& w = waiting[fd];
                if (!w.active || now < w.deadline) continue;
                ::epoll_ctl(epfd, EPOLL_CTL_DEL, static_cast<int>(fd), nullptr);
                if (w.started) {
                    send_error_and_close(config_, static_cast<int>(fd), 408, "Request Timeout",
                                         "request header not received within " +
                                             std::to_string(config_.header_timeout_ms) + " ms",
                                         "request_timeout");
                }
                w.active = false;
                close_connection(static_cast<int>(fd));
            }
        }
    }

    // Stop: no new connections; streams end at their next chunk; waiting and queued connections close.
    http_.close_listen_socket();
    for (size_t fd = 0; fd < waiting.size(); ++fd) {
        if (waiting[fd].active) close_connection(static_cast<int>(fd));
    }
    std::vector<std::thread> workers;
    {
        std::lock_guard<std::mutex> lock(mu_);
        for (const Job& j : jobs_) close_connection(j.fd);
        jobs_.clear();
        workers_stop_ = true;
        workers.swap(workers_);
    }
    cv_.notify_all();
    for (auto& t : workers) t.join();
    for (const Job& j : returned_) close_connection(j.fd);
    returned_.clear();
    ::close(epfd);
    return core::Status();
}

void HttpTransport::accept_all(int listen_fd, int epfd, std::vector<Waiting>& waiting) {
    for (;;) {
        int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            if (errno == EMFILE || errno == ENFILE) {
                DI_LOG(Warn) << "out of file descriptors: " << open_.load()
                             << " connections open; not accepting for 100 ms";
            }
            return; // EAGAIN: all accepted (errno tells the caller which)
        }
        ++open_;
        int yes = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));
        if (static_cast<size_t>(fd) >= waiting.size()) waiting.resize(fd + 1);
        waiting[fd] = {true, false, 0,
                       Clock::now() + std::chrono::milliseconds(config_.keep_alive_timeout_ms)};
        epoll_event e{};
        e.events = EPOLLIN | EPOLLRDHUP;
        e.data.fd = fd;
        ::epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &e);
    }
}

void HttpTransport::on_readable(int fd, int epfd, std::vector<Waiting>& waiting) {
    Waiting& w = waiting[fd];
    if (!w.active) return;
    thread_local std::vector<char> peek;
    peek.resize(config_.max_header_bytes + 1);
    ssize_t n = ::recv(fd, peek.data(), peek.size(), MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
    if (n <= 0) { // the client closed (or the connection broke) before a request
        ::epoll_ctl(epfd, EPOLL_CTL_DEL, fd, nullptr);
        w.active = false;
        close_connection(fd);
        return;
    }
    std::string_view seen(peek.data(), static_cast<size_t>(n));
    if (size_t end = header_end(seen)) {
        ::epoll_ctl(epfd, EPOLL_CTL_DEL, fd, nullptr);
        w.active = false;
        submit(Job{fd, end, body_length(seen.substr(0, end)), w.served});
        return;
    }
    if (static_cast<size_t>(n) > config_.max_header_bytes) {
        ::epoll_ctl(epfd, EPOLL_CTL_DEL, fd, nullptr);
        w.active = false;
        send_error_and_close(config_, fd, 431, "Request Header Fields Too Large",
                             "request header larger than " + std::to_string(config_.max_header_bytes) +
                                 " bytes",
                             "header_too_large");
        close_connection(fd);
        return;
    }
    if (!w.started) {
        w.started = true;
        w.deadline = Clock::now() + std::chrono::milliseconds(config_.header_timeout_ms);
    }
}

void HttpTransport::submit(const Job& job) {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.push_back(job);
    if (static_cast<int>(jobs_.size()) > idle_workers_ &&
        static_cast<int>(workers_.size()) < std::max(1, config_.max_workers)) {
        workers_.emplace_back([this] { worker(); });
    } else {
        cv_.notify_one();
    }
}

void HttpTransport::worker() {
    for (;;) {
        Job job;
        {
            std::unique_lock<std::mutex> lock(mu_);
            ++idle_workers_;
            cv_.wait(lock, [this] { return workers_stop_ || !jobs_.empty(); });
            --idle_workers_;
            if (jobs_.empty()) return; // stopping
            job = jobs_.front();
            jobs_.pop_front();
        }
        serve(job);
    }
}

namespace {
thread_local int t_serving_fd = -1; // the connection this worker thread is serving
} // namespace

bool HttpTransport::client_gone() {
    if (t_serving_fd < 0) return false;
    pollfd p{t_serving_fd, POLLRDHUP, 0};
    return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

void HttpTransport::serve(const Job& job) {
    ConnectionStream strm(job.fd, job.header_bytes, config_);
    struct Serving {
        explicit Serving(int fd) { t_serving_fd = fd; }
        ~Serving() { t_serving_fd = -1; }
    } serving(job.fd);
    const bool last = stop_ || job.served + 1 >= config_.max_requests_per_connection;
    bool closed = false;
    const bool ok = http_.serve_request(strm, last, closed);
    // Kept alive only when the request and its whole body were consumed, so the next bytes are the next
    // request's.
    const bool keep = ok && !closed && !last && !stop_ && strm.header_consumed() && job.content_length >= 0 &&
                      strm.body_read() == static_cast<size_t>(job.content_length);
    if (!keep) {
        close_connection(job.fd);
        return;
    }
    {
        std::lock_guard<std::mutex> lock(mu_);
        returned_.push_back(Job{job.fd, 0, 0, job.served + 1});
    }
    uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof(one));
}

} // namespace deepinfer::http
