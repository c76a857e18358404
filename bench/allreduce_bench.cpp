// All-reduce micro benchmark at decode-step sizes (hidden 4096 x batch, F32), run under mpirun:
//   mpirun --oversubscribe -np 2 --mca btl self,vader build/release/bench/allreduce_bench [iters]
// Prints, per size, the median and best latency of deepinfer's all-reduce (fixed rank-order sum, with the
// watchdog) and of the MPI library's own MPI_Allreduce on the same buffers in the same run (the peer), the
// bus bandwidth (2 (P-1)/P x bytes / time: what each rank moves in reduce-scatter + all-gather) and the
// ratio peer time / our time (1 = as fast as OpenMPI's tuned collective; it may sum in any order).
// The slowest rank's median counts (a step waits for it). Shared machines are noisy: compare columns of
// one run, not runs.

#include "parallel/mpi_runtime.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// Median over ranks' medians -> the slowest rank's median (every rank passes its own).
double slowest(deepinfer::parallel::Communicator& c, double mine) {
    std::vector<float> all(static_cast<std::size_t>(c.size()));
    float m[1] = {static_cast<float>(mine)};
    if (!c.all_gather_f32(m, all).ok()) return -1;
    return *std::max_element(all.begin(), all.end());
}

} // namespace

int main(int argc, char** argv) {
    using namespace deepinfer::parallel;
    auto rt = MpiRuntime::init(&argc, &argv);
    if (!rt.ok()) {
        std::fprintf(stderr, "%s\n", rt.status().to_string().c_str());
        return 2;
    }
    const int iters = argc > 1 ? std::max(5, std::atoi(argv[1])) : 200;
    int rc = 0;
    {
        auto w = (*rt)->world();
        if (!w.ok()) {
            std::fprintf(stderr, "%s\n", w.status().to_string().c_str());
            return 2;
        }
        Communicator& c = **w;
        const int p = c.size();
        if (c.rank() == 0) {
            std::printf("all-reduce F32 sum, %d ranks, %d iterations per size; times in us\n", p, iters);
            std::printf("%6s %9s %10s %9s %10s %9s %9s %8s\n", "batch", "bytes", "ours_med", "ours_min",
                        "mpi_med", "mpi_min", "bus_GB/s", "mpi/ours");
        }
        for (int batch : {1, 4, 16, 64, 256}) {
            const std::size_t n = static_cast<std::size_t>(4096) * batch; // [batch, hidden 4096]
            std::vector<float> x(n, 1.0f);
            std::vector<float> y(n);
            std::vector<double> t, tm;
            for (int i = 0; i < iters + 5; ++i) {
                std::fill(x.begin(), x.end(), 1.0f);
                if (!c.barrier().ok()) return 3;
                const auto t0 = clock_type::now();
                if (auto s = c.all_reduce_sum(x); !s.ok()) {
                    std::fprintf(stderr, "%s\n", s.to_string().c_str());
                    return 3;
                }
                const auto t1 = clock_type::now();
                if (!c.barrier().ok()) return 3;
                const auto t2 = clock_type::now();
                MPI_Allreduce(x.data(), y.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
                const auto t3 = clock_type::now();
                if (i >= 5) {
                    t.push_back(std::chrono::duration<double>(t1 - t0).count());
                    tm.push_back(std::chrono::duration<double>(t3 - t2).count());
                }
            }
            if (x[0] != static_cast<float>(p)) rc = 1;
            const double ours = slowest(c, median(t)), peer = slowest(c, median(tm));
            const double ours_min = slowest(c, *std::min_element(t.begin(), t.end()));
            const double peer_min = slowest(c, *std::min_element(tm.begin(), tm.end()));
            const double bytes = static_cast<double>(n * sizeof(float));
            if (c.rank() == 0) {
                std::printf("%6d %9.0f %10.1f %9.1f %10.1f %9.1f %9.2f %8.2f\n", batch, bytes, ours * 1e6,
                            ours_min * 1e6, peer * 1e6, peer_min * 1e6,
                            2.0 * (p - 1) / p * bytes / ours / 1e9, peer / ours);
            }
        }
    }
    if (!(*rt)->finalize().ok()) return 3;
    return rc;
}
