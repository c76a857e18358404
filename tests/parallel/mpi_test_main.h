// The shared main() of the MPI gtest programs (mpi_collectives_test, mpi_model_test, mpi_cp_test), in
// mpi_test_main.cpp: MPI start-up, the world communicator (20 s deadline) in g_world for the tests, rank 0
// alone printing the per-test lines (the other ranks print only their failures), every rank's verdict
// gathered so that the program fails on every rank when one rank failed, and MPI finalize.
#pragma once

#include "parallel/communicator.h"

namespace deepinfer::parallel::mpi_test {

// The world communicator while RUN_ALL_TESTS runs; null before and after.
extern Communicator* g_world;

} // namespace deepinfer::parallel::mpi_test
