#include "cli/args.h"

#include <algorithm>
#include <cstdlib>

namespace deepinfer::cli {

std::size_t edit_distance(const std::string& a, const std::string& b) {
    std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
        cur[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
        }
        std::swap(prev, cur);
    }
    return prev[b.size()];
}

std::optional<std::string> closest_flag(const std::string& name, const std::set<std::string>& value_flags,
                                        const std::set<std::string>& bool_flags) {
    // Close enough to be a typo or a sibling spelling: at most a third of the longer name differs (and at
    // least 2 edits are allowed for short names); a name that contains, or is contained in, a known one
    // (--tokenizer-path, --port-number) counts too.
    std::optional<std::string> best;
    std::size_t best_d = 0;
    for (const auto* flags : {&value_flags, &bool_flags}) {
        for (const std::string& f : *flags) {
            std::size_t d = edit_distance(name, f);
            const std::size_t limit = std::max<std::size_t>(2, std::max(name.size(), f.size()) / 3);
            const bool contains = name.size() >= 4 && f.size() >= 4 &&
                                  (name.find(f) != std::string::npos || f.find(name) != std::string::npos);
            if (d > limit && !contains) continue;
            if (!best || d < best_d) {
                best = f;
                best_d = d;
            }
        }
    }
    return best;
}

core::Result<Args> Args::parse(const std::vector<std::string>& argv, const std::set<std::string>& value_flags,
                               const std::set<std::string>& bool_flags) {
    Args a;
    for (size_t i = 0; i < argv.size(); ++i) {
        const std::string& s = argv[i];
        if (s.rfind("--", 0) != 0 || s == "--") {
            a.positional_.push_back(s);
            continue;
        }
        std::string name = s.substr(2), value;
        bool inline_value = false;
        if (auto eq = name.find('='); eq != std::string::npos) {
            value = name.substr(eq + 1);
            name = name.substr(0, eq);
            inline_value = true;
        }
        if (bool_flags.count(name)) {
            if (inline_value) return core::invalid_argument("flag --" + name + " takes no value");
            a.bools_.insert(name);
        } else if (value_flags.count(name)) {
            if (!inline_value) {
                if (i + 1 >= argv.size()) return core::invalid_argument("flag --" + name + " needs a value");
                value = argv[++i];
            }
            a.values_[name] = value;
        } else {
            std::string msg = "unknown flag --" + name;
            if (auto near = closest_flag(name, value_flags, bool_flags))
                msg += "; did you mean --" + *near + "?";
            return core::invalid_argument(msg);
        }
    }
    return a;
}

std::optional<std::string> Args::get(const std::string& flag) const {
    auto it = values_.find(flag);
    if (it == values_.end()) return std::nullopt;
    return it->second;
}

std::string Args::get_or(const std::string& flag, const std::string& fallback) const {
    auto v = get(flag);
    return v ? *v : fallback;
}

core::Result<long long> Args::get_int(const std::string& flag, long long fallback) const {
    auto v = get(flag);
    if (!v) return fallback;
    char* end = nullptr;
    long long x = std::strtoll(v->c_str(), &end, 10);
    if (v->empty() || *end != '\0')
        return core::invalid_argument("flag --" + flag + ": '" + *v + "' is not an integer");
    return x;
}

core::Result<double> Args::get_double(const std::string& flag, double fallback) const {
    auto v = get(flag);
    if (!v) return fallback;
    char* end = nullptr;
    double x = std::strtod(v->c_str(), &end);
    if (v->empty() || *end != '\0')
        return core::invalid_argument("flag --" + flag + ": '" + *v + "' is not a number");
    return x;
}

} // namespace deepinfer::cli
