#include "cli/args.h"

#include <cstdlib>

namespace deepinfer::cli {

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
            return core::invalid_argument("unknown flag --" + name);
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
