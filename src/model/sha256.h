#pragma once
// SHA-256 (FIPS 180-4) of a byte string or a file, as lowercase hex: to check that data shipped beside a
// checkpoint (e.g. Engram hash data) belongs to the tokenizer.json in use.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace deepinfer::model {

std::string sha256_hex(std::string_view data);
// The file's digest; an error names the file when it cannot be read.
core::Result<std::string> sha256_file_hex(const std::string& path);

} // namespace deepinfer::model
