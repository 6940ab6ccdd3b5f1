//! Smooth motion on real networks, without IO: [`SnapshotBuffer`] renders
//! another player's or an entity's snapshots at an adaptive delay,
//! interpolated (`docs/SMOOTHING.md`); [`Predictor`] moves the player's own
//! entity at once and reconciles it with the server's [`Acked`] states
//! without a jump. The harness's `netsim::Link` (feature `harness`)
//! simulates what a real network does to them (latency, jitter, a
//! bandwidth cap, the stalls of a reliable transport), with a seed, for
//! tests and demos.

mod interpolate;
mod prediction;

pub use interpolate::{
    Degrees, Interpolate, Pose, Sample, SampleKind, SmoothingConfig, SmoothingStats, SnapshotBuffer,
};
pub use prediction::{Acked, Predictor};

#[cfg(test)]
mod tests;
