#include "structured/number_ranges.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace deepinfer::structured {

namespace {

std::string join_alts(const std::vector<std::string>& alts) {
    if (alts.empty()) return "";
    if (alts.size() == 1) return alts[0];
    std::string out = "(";
    for (std::size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
    return out + ")";
}

std::string digits(char lo, char hi) {
    if (lo == hi) return std::string("\"") + lo + "\"";
    return std::string("[") + lo + "-" + hi + "]";
}

std::string any_digits(std::size_t n) {
    if (n == 0) return "";
    return n == 1 ? "[0-9]" : "[0-9]{" + std::to_string(n) + "}";
}

// Digit strings of equal length between a and b (inclusive, a <= b), leading zeros allowed.
std::string same_length(const std::string& a, const std::string& b) {
    if (a.empty()) return "\"\"";
    if (a == b) return "\"" + a + "\"";
    const std::size_t rest = a.size() - 1;
    if (a[0] == b[0]) return "\"" + std::string(1, a[0]) + "\" " + same_length(a.substr(1), b.substr(1));
    const bool a_floor = a.find_first_not_of('0', 1) == std::string::npos;
    const bool b_ceil = b.find_first_not_of('9', 1) == std::string::npos;
    std::vector<std::string> alts;
    char lo = a[0], hi = b[0];
    if (!a_floor) {
        alts.push_back("\"" + std::string(1, a[0]) + "\" " +
                       same_length(a.substr(1), std::string(rest, '9')));
        ++lo;
    }
    if (!b_ceil) --hi;
    if (lo <= hi) alts.push_back(digits(lo, hi) + (rest ? " " + any_digits(rest) : ""));
    if (!b_ceil)
        alts.push_back("\"" + std::string(1, b[0]) + "\" " +
                       same_length(std::string(rest, '0'), b.substr(1)));
    return join_alts(alts);
}

int64_t pow10(std::size_t n) {
    int64_t v = 1;
    while (n--) v *= 10;
    return v;
}

// Non-negative integers in [lo, hi].
std::string nonneg_range(int64_t lo, int64_t hi) {
    if (lo > hi) return "";
    std::vector<std::string> alts;
    const std::size_t dlo = std::to_string(lo).size(), dhi = std::to_string(hi).size();
    for (std::size_t d = dlo; d <= dhi; ++d) {
        const int64_t a = std::max(lo, d == 1 ? 0 : pow10(d - 1));
        const int64_t b = std::min(hi, pow10(d) - 1);
        if (a <= b) alts.push_back(same_length(std::to_string(a), std::to_string(b)));
    }
    return join_alts(alts);
}

const char* kFrac = "\".\" [0-9]{0,5} [1-9]"; // a fraction > 0 of up to 6 digits

} // namespace

std::string integer_range_expr(int64_t lo, int64_t hi) {
    lo = std::max(lo, -kMaxJsonInt);
    hi = std::min(hi, kMaxJsonInt);
    if (lo > hi) return "";
    std::vector<std::string> alts;
    if (lo < 0) alts.push_back("\"-\" " + nonneg_range(std::max<int64_t>(1, -hi), -lo));
    if (hi >= 0) alts.push_back(nonneg_range(std::max<int64_t>(0, lo), hi));
    return join_alts(alts);
}

std::string number_range_expr(double lo, bool lo_exclusive, double hi, bool hi_exclusive) {
    const double m = static_cast<double>(kMaxJsonInt);
    lo = std::clamp(lo, -m, m);
    hi = std::clamp(hi, -m, m);
    auto fl = [](double v) { return static_cast<int64_t>(std::floor(v)); };
    auto ce = [](double v) { return static_cast<int64_t>(std::ceil(v)); };
    std::vector<std::string> alts;
    // Integers.
    const int64_t ia = lo_exclusive ? fl(lo) + 1 : ce(lo), ib = hi_exclusive ? ce(hi) - 1 : fl(hi);
    if (ia <= ib) alts.push_back(integer_range_expr(ia, ib));
    // x.f (x >= 0) lies in (x, x + 1): needs x >= lo and x + 1 <= hi.
    const int64_t pa = std::max<int64_t>(0, ce(lo)), pb = fl(hi) - 1;
    if (pa <= pb) alts.push_back(nonneg_range(pa, pb) + " " + kFrac);
    // -x.f (x >= 1) lies in (-x - 1, -x): needs -x - 1 >= lo and -x <= hi.
    const int64_t na = std::max<int64_t>(1, ce(-hi)), nb = fl(-lo) - 1;
    if (na <= nb) alts.push_back("\"-\" " + nonneg_range(na, nb) + " " + kFrac);
    // -0.f lies in (-1, 0).
    if (lo <= -1 && hi >= 0) alts.push_back(std::string("\"-0\" ") + kFrac);
    return join_alts(alts);
}

} // namespace deepinfer::structured
