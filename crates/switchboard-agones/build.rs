//! The fake SDK server's service stubs (feature `fake`), from the SDK's own
//! protos in `proto/` (Agones 1.61's, unchanged: `proto/README.md`). The
//! game server's client is the official `agones` crate's, built by it.

fn main() {
    if std::env::var_os("CARGO_FEATURE_FAKE").is_none() {
        return;
    }
    tonic_build::configure()
        .build_client(false)
        .build_server(true)
        .compile_protos(
            &["proto/sdk/sdk.proto", "proto/sdk/beta/beta.proto"],
            &[
                "proto/googleapis",
                "proto/grpc-gateway",
                "proto",
                "proto/sdk",
            ],
        )
        .expect(
            "the Agones protos compile (protoc: Debian's protobuf-compiler and libprotobuf-dev)",
        );
}
