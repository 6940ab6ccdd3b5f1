//! Client-side prediction with server reconciliation, no physics: the
//! player's own inputs are applied at once (no round trip before it
//! moves), numbered and kept; the server applies them too and says, with
//! each state it sends, the last input it reflects; the client then starts
//! again from that state, replays the inputs the server had not seen yet,
//! and blends what it drew toward the corrected path over a short time
//! instead of jumping.
//!
//! ```text
//!  input(i) ──▶ predicted = step(predicted, i)        history: [(7, i7), (8, i8), (9, i9)]
//!  server: Acked { state, last_input: 8 } ──▶ predicted = step(step(state, i9))   history: [(9, i9)]
//!  drawn = the old path blended into the new over `correction`
//! ```

use std::collections::VecDeque;
use std::time::Duration;

use super::Interpolate;

/// What the server sends a player about its own entity: the state after
/// the player's inputs up to `last_input` (its number, as
/// [`Predictor::input`] gave it).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Acked<S> {
    /// The authoritative state.
    pub state: S,
    /// The last of the player's inputs it reflects.
    pub last_input: u32,
}

/// A locally controlled entity: predicted from its inputs, reconciled with
/// the server's states. `step` is the game's rule for one input (the same
/// the server applies).
#[derive(Debug, Clone)]
pub struct Predictor<S, I> {
    predicted: S,
    /// What was drawn before the last correction, carried on with the same
    /// inputs, and how far the blend into `predicted` has come.
    blending: Option<(S, Duration)>,
    history: VecDeque<(u32, I)>,
    next: u32,
    correction: Duration,
    max_history: usize,
    corrections: u64,
}

impl<S: Interpolate, I: Clone> Predictor<S, I> {
    /// Starts at `state`; a correction is blended in over `correction`
    /// (100 ms is a good start); at most `max_history` inputs wait for the
    /// server (past it the oldest are forgotten: the server is that far
    /// behind, and its next state resets the prediction).
    pub fn new(state: S, correction: Duration, max_history: usize) -> Self {
        Self {
            predicted: state,
            blending: None,
            history: VecDeque::new(),
            next: 1,
            correction,
            max_history: max_history.max(1),
            corrections: 0,
        }
    }

    /// Applies the player's `input` now; returns its number, to send with
    /// it to the server.
    pub fn input(&mut self, input: I, step: impl Fn(&S, &I) -> S) -> u32 {
        let number = self.next;
        self.next = self.next.wrapping_add(1);
        self.predicted = step(&self.predicted, &input);
        if let Some((old, _)) = &mut self.blending {
            *old = step(old, &input);
        }
        self.history.push_back((number, input));
        while self.history.len() > self.max_history {
            self.history.pop_front();
        }
        number
    }

    /// The server's state after the inputs up to `acked.last_input`: the
    /// prediction starts again from it with the inputs it has not seen.
    pub fn reconcile(&mut self, acked: Acked<S>, step: impl Fn(&S, &I) -> S) {
        let Acked { state, last_input } = acked;
        // Inputs numbered up to `last_input` (wrapping) are done.
        while self
            .history
            .front()
            .is_some_and(|(n, _)| last_input.wrapping_sub(*n) < u32::MAX / 2)
        {
            self.history.pop_front();
        }
        let mut corrected = state;
        for (_, input) in &self.history {
            corrected = step(&corrected, input);
        }
        let drawn = self.drawn();
        self.predicted = corrected;
        self.blending = Some((drawn, Duration::ZERO));
        self.corrections += 1;
    }

    /// Moves the blend on by `elapsed` (call once a frame before drawing).
    pub fn advance(&mut self, elapsed: Duration) {
        if let Some((_, done)) = &mut self.blending {
            *done += elapsed;
            if *done >= self.correction {
                self.blending = None;
            }
        }
    }

    /// What to draw: the prediction, or the old path on its way into it.
    pub fn drawn(&self) -> S {
        match &self.blending {
            Some((old, done)) if !self.correction.is_zero() => {
                let t = done.as_secs_f32() / self.correction.as_secs_f32();
                old.lerp(&self.predicted, t.min(1.0))
            }
            _ => self.predicted.clone(),
        }
    }

    /// The prediction itself (the state the next input starts from).
    pub fn predicted(&self) -> &S {
        &self.predicted
    }

    /// Inputs sent and not yet reflected by a server state.
    pub fn unacknowledged(&self) -> usize {
        self.history.len()
    }

    /// Server states taken in so far.
    pub fn corrections(&self) -> u64 {
        self.corrections
    }
}
