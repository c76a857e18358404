// `deepinfer-fake`: the deepinfer binary plus `serve --backend fake` (the Python HTTP tests' stand-in
// engine).

#include "cli/serve_backends.h"
#include "fake_backend.h"

namespace deepinfer::cli {
namespace {

core::Result<std::unique_ptr<server::Backend>> make_fake(const Args& args) {
    server::FakeBackendConfig fc;
    auto step = args.get_int("fake-step-us", 1000);
    auto ctx = args.get_int("fake-context", 4096);
    if (!step.ok() || !ctx.ok() || *step < 0 || *ctx < 16) {
        return core::invalid_argument("bad --fake-step-us or --fake-context");
    }
    fc.step_delay_us = static_cast<int>(*step);
    fc.context_length = static_cast<int>(*ctx);
    return std::unique_ptr<server::Backend>(std::make_unique<server::FakeBackend>(fc));
}

const ServeBackendRegistrar kFake(ServeBackend{"fake", make_fake});

} // namespace
} // namespace deepinfer::cli
