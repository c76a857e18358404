#pragma once
// Communicator: the collectives a sharded model and the step protocol need, over one group of ranks.
//
// Implementations: LocalCommunicator (one process, size 1), MpiCommunicator (OpenMPI), later NCCL.
//
// Rules every implementation keeps (docs/parallelism.md):
//   - Every rank of the group enters every collective, in the same order, with matching sizes. A rank that
//     skips one (e.g. a periodic statistics exchange gated on a rank-local condition) would hang the others;
//     here it makes them fail with a watchdog error instead, but the job is lost either way.
//   - Sums run in a fixed order: element i of an all-reduce is ((x_0[i] + x_1[i]) + x_2[i]) + ... in rank
//     order, whatever the transport or arrival order, so a result depends only on the inputs and the group
//     size, and a single process reproduces it bit for bit (sum_in_rank_order below).
//   - Every collective has a deadline (the watchdog). Past it, or when a peer is gone, the call returns an
//     Unavailable Status naming the collective and the rank(s) that did not answer, and the communicator is
//     broken: every later call returns that same error at once. The caller fails its requests and exits
//     non-zero; it must not try to recover the group.
//   - Size mismatches between the spans passed in are InvalidArgument, checked before anything is sent.
//   - One thread at a time uses a communicator (the engine loop's); it is not internally synchronized.

#include "core/status.h"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace deepinfer::parallel {

using core::Result;
using core::Status;

inline constexpr std::chrono::milliseconds kDefaultCollectiveDeadline{30000};

class Communicator {
public:
    virtual ~Communicator() = default;

    virtual int rank() const = 0;
    virtual int size() const = 0;
    // "world", "world/tp3" ...: used in error messages.
    virtual const std::string& name() const = 0;

    // Watchdog: the longest one collective may take before it fails. Default kDefaultCollectiveDeadline.
    virtual void set_deadline(std::chrono::milliseconds deadline) = 0;
    virtual std::chrono::milliseconds deadline() const = 0;

    // In place: data[i] = sum over ranks r (in rank order) of rank r's data[i].   data: [n], same n
    // everywhere
    virtual Status all_reduce_sum(std::span<float> data) = 0;
    // recv[r * n .. (r+1) * n) = rank r's send.   send: [n] bytes, recv: [size * n] bytes
    virtual Status all_gather(std::span<const std::byte> send, std::span<std::byte> recv) = 0;
    // recv = sum over ranks (rank order) of send[rank() * m .. (rank()+1) * m).   send: [size * m], recv: [m]
    virtual Status reduce_scatter_sum(std::span<const float> send, std::span<float> recv) = 0;
    // data on every rank = root's data. data: [n] bytes, same n everywhere.
    virtual Status broadcast(std::span<std::byte> data, int root) = 0;
    virtual Status barrier() = 0;
    // EP dispatch: rank r sends send[displ_s(p) .. + send_counts[p]) to p and receives recv_counts[p] bytes
    // from p into recv[displ_r(p) ..), displacements being prefix sums of the counts (packed, rank order).
    // send_counts[p] on rank r must equal recv_counts[r] on rank p.
    virtual Status all_to_all_v(std::span<const std::byte> send, std::span<const std::size_t> send_counts,
                                std::span<std::byte> recv, std::span<const std::size_t> recv_counts) = 0;

    // A sub-group of the ranks that pass the same color (>= 0), ordered by (key, rank). Every rank of this
    // group must call it. The child inherits the deadline.
    virtual Result<std::unique_ptr<Communicator>> split(int color, int key) = 0;

    // --- typed conveniences over the byte collectives (non-virtual) ---
    Status all_gather_f32(std::span<const float> send, std::span<float> recv);
    Status all_gather_i64(std::span<const std::int64_t> send, std::span<std::int64_t> recv);
    Status broadcast_f32(std::span<float> data, int root);
    // A byte string whose length only the root knows: length first, then the payload.
    Status broadcast_bytes(std::vector<std::byte>& data, int root);
    // Counts in floats.
    Status all_to_all_v_f32(std::span<const float> send, std::span<const std::size_t> send_counts,
                            std::span<float> recv, std::span<const std::size_t> recv_counts);
};

// The reference reduction: out[i] = ((parts[0][i] + parts[1][i]) + parts[2][i]) + ...
// Every implementation's all-reduce / reduce-scatter equals this bit for bit.
void sum_in_rank_order(std::span<const std::span<const float>> parts, std::span<float> out);

// Argument checks shared by the implementations (InvalidArgument naming the collective and the sizes).
Status check_all_gather_sizes(const Communicator& c, std::size_t send_bytes, std::size_t recv_bytes);
Status check_reduce_scatter_sizes(const Communicator& c, std::size_t send_n, std::size_t recv_n);
Status check_root(const Communicator& c, std::string_view op, int root);
Status check_all_to_all_sizes(const Communicator& c, std::size_t send_bytes,
                              std::span<const std::size_t> send_counts, std::size_t recv_bytes,
                              std::span<const std::size_t> recv_counts);

} // namespace deepinfer::parallel
