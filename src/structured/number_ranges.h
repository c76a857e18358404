#pragma once
// GBNF expressions for decimal numbers in a range (JSON Schema minimum / maximum), as JSON writes them:
// no leading zeros, no "-0".

#include <cstdint>
#include <optional>
#include <string>

namespace deepinfer::structured {

// Integers are kept within +-(10^16 - 1) (16 digits), so unbounded sides stop there.
constexpr int64_t kMaxJsonInt = 9'999'999'999'999'999;

// Integers in [lo, hi]; empty string when the range is empty.
std::string integer_range_expr(int64_t lo, int64_t hi);
// Decimal numbers x within the bounds (lo < x when lo_exclusive, else lo <= x; likewise hi), written as
// integers or with a fraction of up to 6 digits (no exponent); a subset near non-integer bounds. Unbounded
// sides: pass +-kMaxJsonInt.
std::string number_range_expr(double lo, bool lo_exclusive, double hi, bool hi_exclusive);

} // namespace deepinfer::structured
