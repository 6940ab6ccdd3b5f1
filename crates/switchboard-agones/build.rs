//! From Agones's own protos in `proto/` (Agones 1.61's, unchanged:
//! `proto/README.md`): the allocator service's client (the matchmaker asks
//! it for a game server), and with feature `fake` the servers of the fake
//! SDK server and allocator. The game server's SDK client is the official
//! `agones` crate's, built by it.

fn main() {
    let fake = std::env::var_os("CARGO_FEATURE_FAKE").is_some();
    tonic_build::configure()
        .build_client(true)
        .build_server(fake)
        .compile_protos(&["proto/allocation/allocation.proto"], &INCLUDES)
        .expect(
            "the Agones protos compile (protoc: Debian's protobuf-compiler and libprotobuf-dev)",
        );
    if !fake {
        return;
    }
    tonic_build::configure()
        .build_client(false)
        .build_server(true)
        .compile_protos(
            &["proto/sdk/sdk.proto", "proto/sdk/beta/beta.proto"],
            &INCLUDES,
        )
        .expect(
            "the Agones protos compile (protoc: Debian's protobuf-compiler and libprotobuf-dev)",
        );
}

const INCLUDES: [&str; 4] = [
    "proto/googleapis",
    "proto/grpc-gateway",
    "proto",
    "proto/sdk",
];
