#include "parallel/mpi_communicator.h"

#include "parallel/mpi_runtime.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

namespace deepinfer::parallel {
namespace {

// One tag per collective kind: a rank that entered a different collective than its peers (a bug breaking
// the all-ranks-enter-every-collective rule) times out instead of receiving the wrong bytes.
enum Tag : int {
    kTagAllReduce = 101,
    kTagAllReduceGather = 102,
    kTagReduceScatter = 103,
    kTagAllGather = 104,
    kTagBroadcast = 105,
    kTagBarrier = 106,
    kTagAllToAll = 107,
    kTagSplit = 108,
};

std::atomic<bool> g_failed{false};
std::atomic<std::uint64_t> g_bytes_sent{0}; // payload bytes this process posted to MPI sends
std::atomic<bool> g_runtime_alive{false};

// Buffers of broken communicators: MPI may still hold requests into them, so they live until exit. A
// reachable global, so leak checkers do not report it.
std::mutex g_parked_mu;
std::vector<std::vector<std::byte>>* parked_buffers() {
    static auto* v = new std::vector<std::vector<std::byte>>();
    return v;
}

std::string mpi_error_text(int rc) {
    char buf[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, buf, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(rc);
    return std::string(buf, static_cast<std::size_t>(len));
}

std::vector<std::size_t> even_offsets(std::size_t n, int parts) {
    std::vector<std::size_t> off(static_cast<std::size_t>(parts) + 1);
    for (int p = 0; p <= parts; ++p)
        off[p] = n * static_cast<std::size_t>(p) / static_cast<std::size_t>(parts);
    return off;
}

} // namespace

struct MpiCommunicator::Pending {
    std::vector<MPI_Request> reqs;
    std::vector<int> peer;
    std::vector<char> is_recv;
    std::vector<std::size_t> bytes;
};

MpiCommunicator::MpiCommunicator(MPI_Comm comm, std::string name, std::chrono::milliseconds deadline)
    : comm_(comm), name_(std::move(name)), deadline_(deadline) {
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    world_ranks_.resize(static_cast<std::size_t>(size_));
    std::vector<int> mine(static_cast<std::size_t>(size_));
    for (int i = 0; i < size_; ++i) mine[i] = i;
    MPI_Group g = MPI_GROUP_NULL, wg = MPI_GROUP_NULL;
    MPI_Comm_group(comm_, &g);
    MPI_Comm_group(MPI_COMM_WORLD, &wg);
    MPI_Group_translate_ranks(g, size_, mine.data(), wg, world_ranks_.data());
    MPI_Group_free(&g);
    MPI_Group_free(&wg);
}

MpiCommunicator::~MpiCommunicator() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    // A broken communicator may have requests in flight: freeing it could block; leave it to process exit.
    if (!finalized && broken_.ok() && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

std::string MpiCommunicator::where() const {
    return "group '" + name_ + "' (rank " + std::to_string(rank_) + " of " + std::to_string(size_) + ")";
}

std::string MpiCommunicator::peers_text(const std::vector<int>& peers) const {
    std::string s = "rank(s) ";
    for (std::size_t i = 0; i < peers.size(); ++i) s += (i ? "," : "") + std::to_string(peers[i]);
    if (name_ != "world") {
        s += " (world rank(s) ";
        for (std::size_t i = 0; i < peers.size(); ++i)
            s += (i ? "," : "") + std::to_string(world_ranks_[peers[i]]);
        s += ")";
    }
    return s;
}

Status MpiCommunicator::fail(Status s) {
    broken_ = s;
    g_failed.store(true);
    std::lock_guard<std::mutex> lock(g_parked_mu);
    parked_buffers()->push_back(std::move(send_buf_));
    parked_buffers()->push_back(std::move(recv_buf_));
    send_buf_ = {};
    recv_buf_ = {};
    return s;
}

Status MpiCommunicator::post(Pending& p, bool is_recv, void* buf, std::size_t bytes, int peer, int tag,
                             std::string_view op) {
    if (bytes > static_cast<std::size_t>(INT_MAX)) {
        return core::invalid_argument(std::string(op) + " on " + where() + ": a message of " +
                                      std::to_string(bytes) +
                                      " bytes exceeds MPI's int count; split the call");
    }
    MPI_Request req = MPI_REQUEST_NULL;
    const int n = static_cast<int>(bytes);
    const int rc = is_recv ? MPI_Irecv(buf, n, MPI_BYTE, peer, tag, comm_, &req)
                           : MPI_Isend(buf, n, MPI_BYTE, peer, tag, comm_, &req);
    if (rc != MPI_SUCCESS) {
        return fail(core::unavailable(std::string(op) + " on " + where() + ": posting a " +
                                      (is_recv ? "receive from " : "send to ") + peers_text({peer}) +
                                      " failed: " + mpi_error_text(rc)));
    }
    if (!is_recv) g_bytes_sent.fetch_add(bytes, std::memory_order_relaxed);
    p.reqs.push_back(req);
    p.peer.push_back(peer);
    p.is_recv.push_back(is_recv ? 1 : 0);
    p.bytes.push_back(bytes);
    return {};
}

Status MpiCommunicator::complete(Pending& p, std::string_view op, std::size_t bytes) {
    using clock = std::chrono::steady_clock;
    const auto start = clock::now();
    const auto limit = start + deadline_;
    const int n = static_cast<int>(p.reqs.size());
    std::vector<int> idx(static_cast<std::size_t>(n));
    std::vector<MPI_Status> st(static_cast<std::size_t>(n));
    std::vector<char> done(static_cast<std::size_t>(n), 0);
    int remaining = n;
    while (remaining > 0) {
        int outcount = 0;
        const int rc = MPI_Testsome(n, p.reqs.data(), &outcount, idx.data(), st.data());
        if (rc != MPI_SUCCESS) {
            std::vector<int> bad;
            if (rc == MPI_ERR_IN_STATUS) {
                for (int k = 0; k < outcount; ++k) {
                    if (st[k].MPI_ERROR != MPI_SUCCESS) bad.push_back(p.peer[idx[k]]);
                }
            }
            return fail(core::unavailable(std::string(op) + " (" + std::to_string(bytes) + " bytes) on " +
                                          where() + ": transport error" +
                                          (bad.empty() ? std::string() : " with " + peers_text(bad)) + ": " +
                                          mpi_error_text(rc) + "; a peer rank is gone"));
        }
        if (outcount == MPI_UNDEFINED) break;
        for (int k = 0; k < outcount; ++k) {
            const int i = idx[k];
            done[i] = 1;
            if (p.is_recv[i]) {
                int got = 0;
                MPI_Get_count(&st[k], MPI_BYTE, &got);
                if (static_cast<std::size_t>(got) != p.bytes[i]) {
                    return fail(core::internal_error(
                        std::string(op) + " on " + where() + ": received " + std::to_string(got) +
                        " bytes from " + peers_text({p.peer[i]}) + ", expected " +
                        std::to_string(p.bytes[i]) + " (ranks called collectives with different sizes)"));
                }
            }
        }
        remaining -= outcount;
        if (remaining == 0) break;
        const auto now = clock::now();
        if (now >= limit) {
            std::vector<int> silent;
            for (int i = 0; i < n; ++i) {
                if (!done[i] && std::find(silent.begin(), silent.end(), p.peer[i]) == silent.end()) {
                    silent.push_back(p.peer[i]);
                }
            }
            std::sort(silent.begin(), silent.end());
            return fail(
                core::unavailable(std::string(op) + " (" + std::to_string(bytes) + " bytes) on " + where() +
                                  ": no answer from " + peers_text(silent) + " within the " +
                                  std::to_string(deadline_.count()) +
                                  " ms deadline (the rank died, is stopped, or skipped this collective)"));
        }
        // Large messages move in fragments that progress only inside MPI calls on both sides, so poll
        // without sleeping while a transfer is plausibly under way: spin for 1 ms, then yield (ranks may
        // share cores), and sleep between polls only after 100 ms (a follower idling for the next step).
        const auto waited = now - start;
        if (waited > std::chrono::milliseconds(100)) {
            std::this_thread::sleep_for(std::chrono::microseconds(200));
        } else if (waited > std::chrono::milliseconds(1)) {
            std::this_thread::yield();
        }
    }
    return {};
}

Status MpiCommunicator::reduce_own_chunk(std::string_view op, std::size_t n, float* out) {
    // Called with send_buf_ = this rank's n floats and recv_buf_ = size_ slots of the own chunk's length,
    // slot q holding rank q's copy of it (slot rank_ unused).
    const auto off = even_offsets(n, size_);
    const std::size_t len = off[rank_ + 1] - off[rank_];
    std::vector<std::span<const float>> parts(static_cast<std::size_t>(size_));
    const auto* slots = reinterpret_cast<const float*>(recv_buf_.data());
    for (int q = 0; q < size_; ++q) {
        parts[q] =
            q == rank_
                ? std::span<const float>(reinterpret_cast<const float*>(send_buf_.data()) + off[rank_], len)
                : std::span<const float>(slots + static_cast<std::size_t>(q) * len, len);
    }
    sum_in_rank_order(parts, std::span<float>(out, len));
    return {};
}

Status MpiCommunicator::all_reduce_sum(std::span<float> data) {
    if (!broken_.ok()) return broken_;
    if (size_ == 1 || data.empty()) return {}; // every rank has the same n, so all return here together
    const std::size_t n = data.size();
    const auto off = even_offsets(n, size_);
    const std::size_t len = off[rank_ + 1] - off[rank_];
    send_buf_.resize(n * sizeof(float));
    std::memcpy(send_buf_.data(), data.data(), n * sizeof(float));
    // recv_buf_: [size_ slots of len floats][n floats: the gathered result]
    recv_buf_.resize((static_cast<std::size_t>(size_) * len + n) * sizeof(float));
    auto* slots = reinterpret_cast<float*>(recv_buf_.data());
    float* result = slots + static_cast<std::size_t>(size_) * len;
    auto* mine = reinterpret_cast<float*>(send_buf_.data());

    Pending p1;
    for (int q = 0; q < size_; ++q) {
        if (q == rank_) continue;
        DI_RETURN_IF_ERROR(post(p1, true, slots + static_cast<std::size_t>(q) * len, len * sizeof(float), q,
                                kTagAllReduce, "all_reduce_sum"));
        DI_RETURN_IF_ERROR(post(p1, false, mine + off[q], (off[q + 1] - off[q]) * sizeof(float), q,
                                kTagAllReduce, "all_reduce_sum"));
    }
    DI_RETURN_IF_ERROR(complete(p1, "all_reduce_sum", n * sizeof(float)));
    DI_RETURN_IF_ERROR(reduce_own_chunk("all_reduce_sum", n, result + off[rank_]));

    Pending p2;
    for (int q = 0; q < size_; ++q) {
        if (q == rank_) continue;
        DI_RETURN_IF_ERROR(post(p2, true, result + off[q], (off[q + 1] - off[q]) * sizeof(float), q,
                                kTagAllReduceGather, "all_reduce_sum"));
        DI_RETURN_IF_ERROR(post(p2, false, result + off[rank_], len * sizeof(float), q, kTagAllReduceGather,
                                "all_reduce_sum"));
    }
    DI_RETURN_IF_ERROR(complete(p2, "all_reduce_sum", n * sizeof(float)));
    std::memcpy(data.data(), result, n * sizeof(float));
    return {};
}

Status MpiCommunicator::reduce_scatter_sum(std::span<const float> send, std::span<float> recv) {
    if (!broken_.ok()) return broken_;
    DI_RETURN_IF_ERROR(check_reduce_scatter_sizes(*this, send.size(), recv.size()));
    const std::size_t m = recv.size();
    const std::size_t n = send.size();
    send_buf_.resize(n * sizeof(float));
    if (n) std::memcpy(send_buf_.data(), send.data(), n * sizeof(float));
    recv_buf_.resize(static_cast<std::size_t>(size_) * m * sizeof(float));
    auto* slots = reinterpret_cast<float*>(recv_buf_.data());
    auto* mine = reinterpret_cast<float*>(send_buf_.data());
    Pending p;
    for (int q = 0; q < size_; ++q) {
        if (q == rank_) continue;
        DI_RETURN_IF_ERROR(post(p, true, slots + static_cast<std::size_t>(q) * m, m * sizeof(float), q,
                                kTagReduceScatter, "reduce_scatter_sum"));
        DI_RETURN_IF_ERROR(post(p, false, mine + static_cast<std::size_t>(q) * m, m * sizeof(float), q,
                                kTagReduceScatter, "reduce_scatter_sum"));
    }
    DI_RETURN_IF_ERROR(complete(p, "reduce_scatter_sum", n * sizeof(float)));
    // even_offsets(n, size_) of n = size_ * m gives chunks of exactly m.
    return reduce_own_chunk("reduce_scatter_sum", n, recv.data());
}

Status MpiCommunicator::all_gather(std::span<const std::byte> send, std::span<std::byte> recv) {
    if (!broken_.ok()) return broken_;
    DI_RETURN_IF_ERROR(check_all_gather_sizes(*this, send.size(), recv.size()));
    const std::size_t n = send.size();
    send_buf_.assign(send.begin(), send.end());
    recv_buf_.resize(recv.size());
    Pending p;
    for (int q = 0; q < size_; ++q) {
        if (q == rank_) continue;
        DI_RETURN_IF_ERROR(post(p, true, recv_buf_.data() + static_cast<std::size_t>(q) * n, n, q,
                                kTagAllGather, "all_gather"));
        DI_RETURN_IF_ERROR(post(p, false, send_buf_.data(), n, q, kTagAllGather, "all_gather"));
    }
    DI_RETURN_IF_ERROR(complete(p, "all_gather", recv.size()));
    if (n) std::memcpy(recv_buf_.data() + static_cast<std::size_t>(rank_) * n, send_buf_.data(), n);
    if (!recv.empty()) std::memcpy(recv.data(), recv_buf_.data(), recv.size());
    return {};
}

Status MpiCommunicator::broadcast(std::span<std::byte> data, int root) {
    if (!broken_.ok()) return broken_;
    DI_RETURN_IF_ERROR(check_root(*this, "broadcast", root));
    const std::size_t n = data.size();
    Pending p;
    if (rank_ == root) {
        send_buf_.assign(data.begin(), data.end());
        for (int q = 0; q < size_; ++q) {
            if (q != rank_)
                DI_RETURN_IF_ERROR(post(p, false, send_buf_.data(), n, q, kTagBroadcast, "broadcast"));
        }
        return complete(p, "broadcast", n);
    }
    recv_buf_.resize(n);
    DI_RETURN_IF_ERROR(post(p, true, recv_buf_.data(), n, root, kTagBroadcast, "broadcast"));
    DI_RETURN_IF_ERROR(complete(p, "broadcast", n));
    if (n) std::memcpy(data.data(), recv_buf_.data(), n);
    return {};
}

Status MpiCommunicator::barrier() {
    if (!broken_.ok()) return broken_;
    send_buf_.assign(1, std::byte{0});
    recv_buf_.resize(static_cast<std::size_t>(size_));
    Pending p;
    for (int q = 0; q < size_; ++q) {
        if (q == rank_) continue;
        DI_RETURN_IF_ERROR(post(p, true, recv_buf_.data() + q, 1, q, kTagBarrier, "barrier"));
        DI_RETURN_IF_ERROR(post(p, false, send_buf_.data(), 1, q, kTagBarrier, "barrier"));
    }
    return complete(p, "barrier", 0);
}

Status MpiCommunicator::all_to_all_v(std::span<const std::byte> send,
                                     std::span<const std::size_t> send_counts, std::span<std::byte> recv,
                                     std::span<const std::size_t> recv_counts) {
    if (!broken_.ok()) return broken_;
    DI_RETURN_IF_ERROR(check_all_to_all_sizes(*this, send.size(), send_counts, recv.size(), recv_counts));
    if (send_counts[rank_] != recv_counts[rank_]) {
        return core::invalid_argument("all_to_all_v on " + where() + ": this rank sends itself " +
                                      std::to_string(send_counts[rank_]) + " bytes but expects " +
                                      std::to_string(recv_counts[rank_]));
    }
    std::vector<std::size_t> sd(static_cast<std::size_t>(size_) + 1, 0),
        rd(static_cast<std::size_t>(size_) + 1, 0);
    for (int q = 0; q < size_; ++q) sd[q + 1] = sd[q] + send_counts[q], rd[q + 1] = rd[q] + recv_counts[q];
    send_buf_.assign(send.begin(), send.end());
    recv_buf_.resize(recv.size());
    Pending p;
    for (int q = 0; q < size_; ++q) {
        if (q == rank_) continue;
        DI_RETURN_IF_ERROR(
            post(p, true, recv_buf_.data() + rd[q], recv_counts[q], q, kTagAllToAll, "all_to_all_v"));
        DI_RETURN_IF_ERROR(
            post(p, false, send_buf_.data() + sd[q], send_counts[q], q, kTagAllToAll, "all_to_all_v"));
    }
    DI_RETURN_IF_ERROR(complete(p, "all_to_all_v", send.size() + recv.size()));
    if (send_counts[rank_])
        std::memcpy(recv_buf_.data() + rd[rank_], send_buf_.data() + sd[rank_], send_counts[rank_]);
    if (!recv.empty()) std::memcpy(recv.data(), recv_buf_.data(), recv.size());
    return {};
}

Result<std::unique_ptr<Communicator>> MpiCommunicator::split(int color, int key) {
    if (!broken_.ok()) return broken_;
    if (color < 0) {
        return core::invalid_argument("split of " + where() + ": color " + std::to_string(color) +
                                      " must be >= 0");
    }
    // MPI_Comm_split blocks without a deadline: a watched exchange first proves every rank is here.
    std::int64_t mine[2] = {color, key};
    std::vector<std::int64_t> all(static_cast<std::size_t>(size_) * 2);
    DI_RETURN_IF_ERROR(all_gather_i64(mine, all));
    MPI_Comm child = MPI_COMM_NULL;
    const int rc = MPI_Comm_split(comm_, color, key, &child);
    if (rc != MPI_SUCCESS) {
        return fail(core::unavailable("split of " + where() + " failed: " + mpi_error_text(rc)));
    }
    return std::unique_ptr<Communicator>(
        std::make_unique<MpiCommunicator>(child, name_ + "/c" + std::to_string(color), deadline_));
}

// ---- runtime ----

std::uint64_t MpiRuntime::bytes_sent() {
    return g_bytes_sent.load(std::memory_order_relaxed);
}

bool launched_by_mpirun() {
    for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "PMI_RANK"}) {
        if (std::getenv(v) != nullptr) return true;
    }
    return false;
}

Result<std::unique_ptr<MpiRuntime>> MpiRuntime::init(int* argc, char*** argv) {
    if (g_runtime_alive.load()) return core::failed_precondition("MPI runtime: already initialized");
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized) return core::failed_precondition("MPI runtime: MPI was initialized elsewhere");
    // A TCP peer that died turns the next write to its socket into SIGPIPE, whose default action kills
    // this process silently, before the watchdog can report. Ignored, the write fails with EPIPE and the
    // collective fails with a Status instead.
    std::signal(SIGPIPE, SIG_IGN);
    int provided = 0;
    const int rc = MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided);
    if (rc != MPI_SUCCESS)
        return core::unavailable("MPI runtime: MPI_Init_thread failed: " + mpi_error_text(rc));
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (provided < MPI_THREAD_SERIALIZED) {
        MPI_Finalize();
        return core::failed_precondition("MPI runtime: the MPI library lacks MPI_THREAD_SERIALIZED support");
    }
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    g_runtime_alive.store(true);
    return std::unique_ptr<MpiRuntime>(new MpiRuntime(rank, size));
}

MpiRuntime::~MpiRuntime() {
    if (!finalized_) (void)finalize();
    g_runtime_alive.store(false);
}

Result<std::unique_ptr<Communicator>> MpiRuntime::world(std::chrono::milliseconds deadline) {
    MPI_Comm dup = MPI_COMM_NULL;
    const int rc = MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    if (rc != MPI_SUCCESS)
        return core::unavailable("MPI runtime: MPI_Comm_dup failed: " + mpi_error_text(rc));
    return std::unique_ptr<Communicator>(std::make_unique<MpiCommunicator>(dup, "world", deadline));
}

bool MpiRuntime::healthy() {
    return !g_failed.load();
}

Status MpiRuntime::finalize() {
    if (finalized_) return {};
    if (!healthy()) {
        return core::failed_precondition(
            "MPI runtime: not finalizing: a collective failed and MPI_Finalize would "
            "wait for the lost rank; exit the process non-zero");
    }
    finalized_ = true;
    const int rc = MPI_Finalize();
    if (rc != MPI_SUCCESS)
        return core::unavailable("MPI runtime: MPI_Finalize failed: " + mpi_error_text(rc));
    return {};
}

} // namespace deepinfer::parallel
