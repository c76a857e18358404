// The main() shared by the MPI gtest programs (mpi_test_main.h).

#include "mpi_test_main.h"

#include "parallel/mpi_runtime.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <vector>

namespace deepinfer::parallel::mpi_test {

Communicator* g_world = nullptr;

namespace {

// On the ranks other than 0, in place of gtest's printer: only the failures, each naming its rank.
class FailurePrinter : public ::testing::EmptyTestEventListener {
public:
    explicit FailurePrinter(int rank) : rank_(rank) {}
    void OnTestPartResult(const ::testing::TestPartResult& r) override {
        if (r.failed())
            std::fprintf(stderr, "rank %d: %s:%d: %s\n", rank_, r.file_name() ? r.file_name() : "?",
                         r.line_number(), r.summary());
    }

private:
    int rank_;
};

} // namespace
} // namespace deepinfer::parallel::mpi_test

int main(int argc, char** argv) {
    using namespace deepinfer::parallel;
    auto rt = MpiRuntime::init(&argc, &argv);
    if (!rt.ok()) {
        std::fprintf(stderr, "%s\n", rt.status().to_string().c_str());
        return 2;
    }
    ::testing::InitGoogleTest(&argc, argv);
    int rc = 0;
    {
        auto w = (*rt)->world(std::chrono::milliseconds(20000));
        if (!w.ok()) {
            std::fprintf(stderr, "%s\n", w.status().to_string().c_str());
            return 2;
        }
        Communicator& world = **w;
        mpi_test::g_world = &world;
        if (world.rank() != 0) {
            // Only failures from the other ranks: the per-test lines of N ranks would interleave.
            auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
            delete listeners.Release(listeners.default_result_printer());
            listeners.Append(new mpi_test::FailurePrinter(world.rank()));
        }
        rc = RUN_ALL_TESTS();
        // Every rank reports its verdict; rank 0 prints which ranks failed.
        std::int64_t mine[1] = {rc};
        std::vector<std::int64_t> all(world.size());
        if (world.all_gather_i64(mine, all).ok()) {
            for (int r = 0; r < world.size(); ++r) {
                if (all[r] != 0 && world.rank() == 0) std::fprintf(stderr, "rank %d had failures\n", r);
                if (all[r] != 0) rc = 1;
            }
        } else {
            rc = 1;
        }
        mpi_test::g_world = nullptr;
    }
    if (!(*rt)->finalize().ok()) return 3;
    return rc;
}
