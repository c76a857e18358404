// A 4-rank stand-in for a sharded engine, used by fault_test.sh: the leader publishes steps, every rank
// runs one all-reduce per step (as a TP layer would). The test kills (-9) or stops (SIGSTOP) one rank, or
// asks the victim to enter the wrong collective; every other rank must report an error naming it and exit
// non-zero, within the deadline, instead of hanging.
//
//   mpi_fault_probe --dir D --deadline-ms MS --victim R --mode kill|stop|skip
// Writes D/pid.<rank> once in the step loop, and D/result.<rank> ("FAILED ..." or "OK ...") at the end.

#include "parallel/mpi_runtime.h"
#include "parallel/step_channel.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <unistd.h>

namespace {

void write_file(const std::string& path, const std::string& text) {
    // Write then rename, so the test never reads half a file.
    const std::string tmp = path + ".tmp";
    if (FILE* f = std::fopen(tmp.c_str(), "w")) {
        std::fputs(text.c_str(), f);
        std::fclose(f);
        std::rename(tmp.c_str(), path.c_str());
    }
}

} // namespace

int main(int argc, char** argv) {
    using namespace deepinfer::parallel;
    std::string dir = ".", mode = "kill";
    int deadline_ms = 3000, victim = 2, max_steps = 3000;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string k = argv[i];
        if (k == "--dir") dir = argv[i + 1];
        if (k == "--deadline-ms") deadline_ms = std::atoi(argv[i + 1]);
        if (k == "--victim") victim = std::atoi(argv[i + 1]);
        if (k == "--mode") mode = argv[i + 1];
        if (k == "--max-steps") max_steps = std::atoi(argv[i + 1]);
    }
    auto rt = MpiRuntime::init(&argc, &argv);
    if (!rt.ok()) {
        std::fprintf(stderr, "%s\n", rt.status().to_string().c_str());
        return 2;
    }
    const int me = (*rt)->world_rank();
    const auto start = std::chrono::steady_clock::now();
    auto fail = [&](const deepinfer::core::Status& s) {
        const auto ms =
            std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start)
                .count();
        const std::string line =
            "FAILED rank " + std::to_string(me) + " at " + std::to_string(ms) + " ms: " + s.to_string();
        std::fprintf(stderr, "%s\n", line.c_str());
        write_file(dir + "/result." + std::to_string(me), line + "\n");
        // No MPI_Finalize: it would wait for the lost rank. A leader would fail its requests here.
        std::fflush(nullptr);
        _exit(3);
    };
    auto w = (*rt)->world(std::chrono::milliseconds(deadline_ms));
    if (!w.ok()) fail(w.status());
    Communicator& world = **w;
    StepChannel ch(world);
    std::vector<float> act(4096 * 4, 1.0f); // [batch 4, hidden 4096]
    bool wrote_pid = false;
    for (int step = 1; step <= max_steps; ++step) {
        if (ch.is_leader()) {
            StepMessage m;
            m.token_ids = {1, 2, 3, 4};
            m.positions = {step, step, step, step};
            m.sequences = {{0, 0, step, 4, 0, {0}}};
            m.logits_rows = {3};
            if (auto s = ch.publish(m); !s.ok()) fail(s);
        } else {
            auto m = ch.receive();
            if (!m.ok()) fail(m.status());
        }
        if (mode == "skip" && me == victim && step == 20) {
            // The bug the rule forbids: this rank enters another collective than its peers.
            if (auto s = world.barrier(); !s.ok()) fail(s);
        } else {
            std::fill(act.begin(), act.end(), 1.0f);
            if (auto s = world.all_reduce_sum(act); !s.ok()) fail(s);
            if (act[0] != static_cast<float>(world.size())) {
                fail(deepinfer::core::internal_error("all-reduce gave " + std::to_string(act[0])));
            }
        }
        if (!wrote_pid && step >= 3) {
            write_file(dir + "/pid." + std::to_string(me), std::to_string(getpid()) + "\n");
            wrote_pid = true;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    write_file(dir + "/result." + std::to_string(me), "OK rank " + std::to_string(me) + "\n");
    w->reset();
    return (*rt)->finalize().ok() ? 0 : 3;
}
