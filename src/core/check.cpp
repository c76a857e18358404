#include "core/check.h"

#include <cstdio>
#include <cstdlib>

namespace deepinfer::core {

CheckFailure::CheckFailure(const char* file, int line, const char* condition) {
    stream_ << file << ":" << line << ": DI_CHECK failed: " << condition << " ";
}

CheckFailure::~CheckFailure() {
    std::string s = stream_.str();
    std::fprintf(stderr, "%s\n", s.c_str());
    std::fflush(stderr);
    std::abort();
}

} // namespace deepinfer::core
