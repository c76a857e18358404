#pragma once
// DI_CHECK: an always-on assertion for bugs (never for bad input, which returns a Status).
// Prints file:line, the condition and any streamed message, then aborts.
//   DI_CHECK(n <= cap) << "n=" << n;

#include <sstream>

namespace deepinfer::core {

class CheckFailure {
public:
    CheckFailure(const char* file, int line, const char* condition);
    [[noreturn]] ~CheckFailure();
    template <typename T> CheckFailure& operator<<(const T& v) {
        stream_ << v;
        return *this;
    }

private:
    std::ostringstream stream_;
};

// Lets `DI_CHECK(x) << ...` be a void expression in both branches of the ternary.
struct CheckVoidify {
    void operator&(const CheckFailure&) {}
};

} // namespace deepinfer::core

#define DI_CHECK(cond)                                                                                       \
    (cond) ? (void)0                                                                                         \
           : ::deepinfer::core::CheckVoidify() & ::deepinfer::core::CheckFailure(__FILE__, __LINE__, #cond)

#define DI_CHECK_EQ(a, b) DI_CHECK((a) == (b)) << #a "=" << (a) << " " #b "=" << (b) << " "
#define DI_CHECK_LT(a, b) DI_CHECK((a) < (b)) << #a "=" << (a) << " " #b "=" << (b) << " "
#define DI_CHECK_LE(a, b) DI_CHECK((a) <= (b)) << #a "=" << (a) << " " #b "=" << (b) << " "
