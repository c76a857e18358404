#pragma once
// The Engram gather, overlapped (spec §3.3; issue 10): a forward knows every Engram layer's hash ids before
// its first layer runs (they depend on the tokens only), so it queues one job per (chunk, Engram layer) at
// the start of the step, and a worker thread first asks the kernel to read every row's page in
// (madvise(MADV_WILLNEED): the I/O of all jobs in flight at once) and then gathers the rows in job order,
// while the forward's thread runs the embedding and the layers before each Engram layer. The layer waits
// for its job only (wait(): the time is the profiler's `engram_wait`; the worker's time is
// `engram_gather`).
//
// No allocation in steady state: the job list keeps its capacity and the worker is started once; the id
// and output buffers belong to the caller and must stay valid until finish() (or the job's wait()).

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "kernels/profiler.h"
#include "model/deepseek_v41/engram_table.h"

namespace deepinfer::model::deepseek_v41 {

class EngramPrefetcher {
public:
    EngramPrefetcher() = default;
    ~EngramPrefetcher();
    EngramPrefetcher(const EngramPrefetcher&) = delete;
    EngramPrefetcher& operator=(const EngramPrefetcher&) = delete;

    // Starts a new step's job list (the previous step must be finished).
    void begin();
    // Queues out [n * cols, table.dim()] = table rows of ids[t * stride + c] (t < n, c < cols); with
    // `zeros`, zeros instead (the bench-only short circuit: no row is read). Returns the index for wait().
    int64_t add(const EngramTable& table, const int64_t* ids, int64_t n, int64_t cols, int64_t stride,
                float* out, bool zeros);
    // Hands the queued jobs to the worker (started on first use). `profiler` may be nullptr.
    void start(kernels::Profiler* profiler);
    // Blocks until job `job` is done.
    void wait(int64_t job);
    // Blocks until every job of the step is done.
    void finish();

private:
    struct Job {
        const EngramTable* table;
        const int64_t* ids;
        int64_t n, cols, stride;
        float* out;
        bool zeros;
    };
    void run();

    std::mutex mu_;
    std::condition_variable work_cv_, done_cv_;
    std::thread worker_;
    std::vector<Job> jobs_; // written by the forward's thread before start(), read by the worker
    int64_t queued_ = 0;    // jobs handed to the worker (under mu_)
    int64_t done_ = 0;      // jobs finished (under mu_)
    bool stop_ = false;     // under mu_
    kernels::Profiler* profiler_ = nullptr;
};

} // namespace deepinfer::model::deepseek_v41
