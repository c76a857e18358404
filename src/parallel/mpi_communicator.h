#pragma once
// MpiCommunicator: the Communicator over an MPI communicator (include only where <mpi.h> is available).
//
// Every collective is built from nonblocking point-to-point MPI calls (MPI_Isend/MPI_Irecv, no home-made
// transport) completed by a polling loop with a deadline (the watchdog), because:
//   - the sum order must not depend on MPI's algorithm choice: all-reduce = reduce-scatter in which rank r
//     sums chunk r of every rank in rank order, then an all-gather of the summed chunks;
//   - a timeout must name the rank(s) that did not answer, which per-peer requests tell and MPI_Iallreduce
//     does not.
// Data is staged through buffers the communicator owns, so after a timeout no MPI request still points
// into the caller's memory; a broken communicator's buffers are parked until process exit for the same
// reason. Linear fan-out: fine for the group sizes of one model (<= 16 ranks); a tree is future work.

#include "parallel/communicator.h"

#include <mpi.h>

namespace deepinfer::parallel {

class MpiCommunicator final : public Communicator {
public:
    // Takes ownership of `comm` (freed in the destructor unless broken); sets MPI_ERRORS_RETURN on it.
    MpiCommunicator(MPI_Comm comm, std::string name, std::chrono::milliseconds deadline);
    ~MpiCommunicator() override;
    MpiCommunicator(const MpiCommunicator&) = delete;
    MpiCommunicator& operator=(const MpiCommunicator&) = delete;

    int rank() const override { return rank_; }
    int size() const override { return size_; }
    const std::string& name() const override { return name_; }
    void set_deadline(std::chrono::milliseconds d) override { deadline_ = d; }
    std::chrono::milliseconds deadline() const override { return deadline_; }

    Status all_reduce_sum(std::span<float> data) override;
    Status all_gather(std::span<const std::byte> send, std::span<std::byte> recv) override;
    Status reduce_scatter_sum(std::span<const float> send, std::span<float> recv) override;
    Status broadcast(std::span<std::byte> data, int root) override;
    Status barrier() override;
    Status all_to_all_v(std::span<const std::byte> send, std::span<const std::size_t> send_counts,
                        std::span<std::byte> recv, std::span<const std::size_t> recv_counts) override;
    Result<std::unique_ptr<Communicator>> split(int color, int key) override;

    // The error that broke this communicator (ok while healthy).
    const Status& broken() const { return broken_; }

private:
    struct Pending;
    Status post(Pending& p, bool is_recv, void* buf, std::size_t bytes, int peer, int tag,
                std::string_view op);
    Status complete(Pending& p, std::string_view op, std::size_t bytes);
    // Element-wise rank-order sum of chunk rank() of every rank's `n` floats (in send_buf_) into `out`.
    Status reduce_own_chunk(std::string_view op, std::size_t n, float* out);
    Status fail(Status s);
    std::string where() const;
    std::string peers_text(const std::vector<int>& peers) const;

    MPI_Comm comm_ = MPI_COMM_NULL;
    std::string name_;
    std::chrono::milliseconds deadline_;
    int rank_ = 0;
    int size_ = 1;
    std::vector<int> world_ranks_; // group rank -> MPI_COMM_WORLD rank, for messages
    Status broken_;
    std::vector<std::byte> send_buf_;
    std::vector<std::byte> recv_buf_;
};

} // namespace deepinfer::parallel
