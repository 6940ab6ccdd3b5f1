//! Interest by distance inside a zone (no IO): who sees whom, kept in a
//! spatial hash on the ground plane, with separate enter and leave radii so
//! a player on the edge does not flicker, recomputed only for a player that
//! moved past `min_move` or changed cell (a player standing still costs
//! nothing), and relayed at a rate that falls with distance: every
//! transform near, every second one further, every fourth at the edge, by a
//! priority accumulator per pair so that nobody starves.
//!
//! ```text
//!   cell = leave_radius              a recompute scans the 3 x 3 cells
//!   +------+------+------+           around the mover (they hold every
//!   |      |      |      |           player within leave_radius), and
//!   +------+------+------+           the mover's current neighbours:
//!   |      |  P   |      |             not seen, within enter_radius: enters
//!   +------+------+------+             seen, past leave_radius: leaves
//!   |      |      |      |             (in between: stays as it was)
//!   +------+------+------+
//! ```
//!
//! Visibility is symmetric (distance is), so one recompute updates both
//! sides of every pair it touches.

mod world;

#[cfg(test)]
mod tests;

pub use world::{ViewChanges, World};

/// Why an [`InterestConfig`] does not make sense ([`InterestConfig::check`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InterestConfigError {
    /// A radius is not a positive number.
    #[error("the enter and leave radii must be positive")]
    Radii,
    /// The leave radius is inside the enter radius.
    #[error("the leave radius must be at least the enter radius")]
    LeaveInsideEnter,
    /// `min_move` is negative or not a number.
    #[error("min_move must be zero or more")]
    MinMove,
    /// The axes are not two different ones of 0, 1, 2.
    #[error("the axes are two different ones of 0, 1, 2")]
    Axes,
}

/// How interest by distance works in a zone; each field says its default.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct InterestConfig {
    /// A player comes into view within this distance (default 50, in the
    /// game's units).
    pub enter_radius: f32,
    /// A player in view goes out of it past this distance (default 60; at
    /// least `enter_radius`). Between the two nothing changes: no flicker.
    pub leave_radius: f32,
    /// A player's view is recomputed when it moved this far since the last
    /// recompute, or changed cell (default 1). Others' positions are
    /// checked at every recompute, theirs or the mover's.
    pub min_move: f32,
    /// Every transform goes to players within this distance (default 20).
    pub full_rate_within: f32,
    /// Every second one within this distance (default 35); further out,
    /// every fourth.
    pub half_rate_within: f32,
    /// The two axes of the ground plane (default `[0, 2]`: x and z, y up);
    /// `[0, 1]` for a world whose z is up.
    pub axes: [usize; 2],
}

impl Default for InterestConfig {
    fn default() -> Self {
        Self::around(50.0, None, None, [0, 2])
    }
}

impl InterestConfig {
    /// A config for a view radius: leaving at `leave` (default 1.2 times
    /// the view), recomputing past `min_move` (default 1), full rate within
    /// 0.4 and half within 0.7 of the view, on the ground `axes`.
    pub fn around(view: f32, leave: Option<f32>, min_move: Option<f32>, axes: [usize; 2]) -> Self {
        Self {
            enter_radius: view,
            leave_radius: leave.unwrap_or(view * 1.2),
            min_move: min_move.unwrap_or(1.0),
            full_rate_within: view * 0.4,
            half_rate_within: view * 0.7,
            axes,
        }
    }

    /// Checks the radii make sense together.
    pub fn check(&self) -> Result<(), InterestConfigError> {
        let positive = [self.enter_radius, self.leave_radius];
        if positive.iter().any(|r| !r.is_finite() || *r <= 0.0) {
            return Err(InterestConfigError::Radii);
        }
        if self.leave_radius < self.enter_radius {
            return Err(InterestConfigError::LeaveInsideEnter);
        }
        if !self.min_move.is_finite() || self.min_move < 0.0 {
            return Err(InterestConfigError::MinMove);
        }
        if self.axes.iter().any(|a| *a > 2) || self.axes[0] == self.axes[1] {
            return Err(InterestConfigError::Axes);
        }
        Ok(())
    }

    /// What each transform adds to the priority towards a player this far
    /// away: every one near, every second further, every fourth beyond.
    pub(crate) fn share(&self, distance2: f32) -> f32 {
        if distance2 <= self.full_rate_within * self.full_rate_within {
            1.0
        } else if distance2 <= self.half_rate_within * self.half_rate_within {
            0.5
        } else {
            0.25
        }
    }
}
