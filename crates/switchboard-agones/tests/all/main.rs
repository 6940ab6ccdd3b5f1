//! The SDK client against a fake SDK server over real gRPC.

mod allocator;
mod sdk;
