#pragma once
// A small flag parser shared by the subcommands: `--name value`, `--name=value`, boolean `--flag`, and
// positional arguments. Unknown flags are errors naming the flag and the closest known one (edit distance).

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/status.h"

namespace deepinfer::cli {

// Levenshtein distance between two flag names.
std::size_t edit_distance(const std::string& a, const std::string& b);
// The known flag closest to `name` when one is close enough to be what was meant; nullopt otherwise.
std::optional<std::string> closest_flag(const std::string& name, const std::set<std::string>& value_flags,
                                        const std::set<std::string>& bool_flags);

class Args {
public:
    // value_flags take a value; bool_flags do not.
    static core::Result<Args> parse(const std::vector<std::string>& argv,
                                    const std::set<std::string>& value_flags,
                                    const std::set<std::string>& bool_flags);

    bool has(const std::string& flag) const { return values_.count(flag) || bools_.count(flag); }
    std::optional<std::string> get(const std::string& flag) const;
    std::string get_or(const std::string& flag, const std::string& fallback) const;
    core::Result<long long> get_int(const std::string& flag, long long fallback) const;
    core::Result<double> get_double(const std::string& flag, double fallback) const;
    const std::vector<std::string>& positional() const { return positional_; }

private:
    std::map<std::string, std::string> values_;
    std::set<std::string> bools_;
    std::vector<std::string> positional_;
};

} // namespace deepinfer::cli
