#pragma once
// `deepinfer serve --backend NAME` for backends other than the engine. A binary that links one registers it
// here; the product binary registers none. The test tree's `deepinfer-fake` binary registers "fake", a
// deterministic stand-in for the HTTP tests (tests/server/fake_backend.h).

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cli/args.h"
#include "core/status.h"
#include "server/backend.h"

namespace deepinfer::cli {

struct ServeBackend {
    std::string name;
    // Builds the backend from serve's flags; an error is a usage error (exit 2) naming the flag.
    std::function<core::Result<std::unique_ptr<server::Backend>>(const Args& args)> make;
};

std::vector<ServeBackend>& serve_backend_registry();

struct ServeBackendRegistrar {
    explicit ServeBackendRegistrar(ServeBackend b) { serve_backend_registry().push_back(std::move(b)); }
};

} // namespace deepinfer::cli
