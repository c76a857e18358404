#pragma once
// MPI as the distributed runtime (OpenMPI from Debian): process start-up and the world communicator.
// Built only with DEEPINFER_WITH_MPI (the default); this header does not include <mpi.h>.
//
//   mpirun -np 4 deepinfer ...   # each process:
//   auto rt = MpiRuntime::init(&argc, &argv);        // MPI_Init_thread (SERIALIZED), errors return
//   auto world = (*rt)->world();                     // a Communicator over MPI_COMM_WORLD (a dup)
//   ... destroy every communicator, then rt->finalize() on a clean exit.
//
// After a collective failed (watchdog or a lost peer) finalize() refuses: MPI_Finalize would wait for the
// lost rank. The process then exits non-zero without it, and mpirun tears the job down.

#include "parallel/communicator.h"

#include <chrono>
#include <cstdint>
#include <memory>

namespace deepinfer::parallel {

// True when this process was started by mpirun/mpiexec (OpenMPI, PMIx or PMI environment variables).
bool launched_by_mpirun();

class MpiRuntime {
public:
    // Initializes MPI once per process; a second call while one runtime lives is FailedPrecondition.
    static Result<std::unique_ptr<MpiRuntime>> init(int* argc, char*** argv);
    ~MpiRuntime();
    MpiRuntime(const MpiRuntime&) = delete;
    MpiRuntime& operator=(const MpiRuntime&) = delete;

    int world_rank() const { return rank_; }
    int world_size() const { return size_; }
    // A new communicator over all ranks (MPI_Comm_dup of MPI_COMM_WORLD: its traffic never mixes with
    // another communicator's). Must be called by every rank.
    Result<std::unique_ptr<Communicator>>
    world(std::chrono::milliseconds deadline = kDefaultCollectiveDeadline);

    // False once any collective of this process failed.
    static bool healthy();
    // Payload bytes this process has sent through every MPI communicator (benchmarks, --profile).
    static std::uint64_t bytes_sent();
    // MPI_Finalize when healthy(); FailedPrecondition (and no finalize) otherwise.
    Status finalize();

private:
    MpiRuntime(int rank, int size) : rank_(rank), size_(size) {}
    int rank_ = 0;
    int size_ = 1;
    bool finalized_ = false;
};

} // namespace deepinfer::parallel
