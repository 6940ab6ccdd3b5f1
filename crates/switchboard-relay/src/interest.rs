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

use std::collections::HashMap;

use switchboard::socket::IdBuildHasher;

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
    pub fn check(&self) -> Result<(), String> {
        let positive = [self.enter_radius, self.leave_radius];
        if positive.iter().any(|r| !r.is_finite() || *r <= 0.0) {
            return Err("the enter and leave radii must be positive".into());
        }
        if self.leave_radius < self.enter_radius {
            return Err("the leave radius must be at least the enter radius".into());
        }
        if !self.min_move.is_finite() || self.min_move < 0.0 {
            return Err("min_move must be zero or more".into());
        }
        if self.axes.iter().any(|a| *a > 2) || self.axes[0] == self.axes[1] {
            return Err("the axes are two different ones of 0, 1, 2".into());
        }
        Ok(())
    }

    /// What each transform adds to the priority towards a player this far
    /// away: every one near, every second further, every fourth beyond.
    fn share(&self, distance2: f32) -> f32 {
        if distance2 <= self.full_rate_within * self.full_rate_within {
            1.0
        } else if distance2 <= self.half_rate_within * self.half_rate_within {
            0.5
        } else {
            0.25
        }
    }
}

/// A cell of the grid, its two coordinates packed in one word (one hash).
/// Cells come from positions players send, so their table keeps the
/// standard (keyed) hasher: chosen positions cannot pile players into one
/// bucket.
type Cell = u64;

fn cell_key(x: i32, z: i32) -> Cell {
    (u64::from(x as u32) << 32) | u64::from(z as u32)
}

fn cell_coords(cell: Cell) -> (i32, i32) {
    ((cell >> 32) as u32 as i32, cell as u32 as i32)
}

/// A player in a cell, with where it is (a scan reads positions from the
/// cell, not from the member table).
#[derive(Debug, Clone, Copy)]
struct Slot {
    id: u32,
    at: [f32; 2],
}

/// A player in the world.
#[derive(Debug)]
struct Member {
    at: [f32; 2],
    /// Where its view was last computed.
    anchor: [f32; 2],
    cell: Cell,
    /// Who it sees (and who sees it), and how its transforms go to each.
    seen: HashMap<u32, Pair, IdBuildHasher>,
}

/// How one player's transforms go to one neighbour.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Pair {
    /// Built up by each transform; one is sent when it reaches 1.
    priority: f32,
    /// What each transform adds: 1, 1/2 or 1/4 by the distance band, as
    /// measured at the last recompute of either player (both sides are
    /// set together, so they never disagree).
    share: f32,
}

/// What a move or an entry changed: pairs that came into view of each
/// other, pairs that went out of it, the mover first in each. On an
/// entry the driver shows the mover where the other stands; the other
/// gets the mover's transform as one of its recipients.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ViewChanges {
    /// (a, b): a and b see each other now.
    pub entered: Vec<(u32, u32)>,
    /// (a, b): a and b no longer see each other.
    pub left: Vec<(u32, u32)>,
}

/// The players of one zone, by place.
#[derive(Debug)]
pub struct World {
    config: InterestConfig,
    cell_size: f32,
    /// Cells scanned each way around a mover.
    ring: i32,
    cells: HashMap<Cell, Vec<Slot>>,
    members: HashMap<u32, Member, IdBuildHasher>,
    /// Views recomputed so far (what standing still saves).
    recomputes: u64,
    /// Scratch space a recompute reuses (no allocation per move).
    kept: Vec<u32>,
    entered_shares: Vec<f32>,
}

impl World {
    /// An empty world (the config is checked by whoever built it).
    pub fn new(config: InterestConfig) -> Self {
        // Cells as wide as the leave radius: the 3 x 3 around a mover hold
        // everyone within it. Smaller cells scan less ground but cost more
        // lookups (5 x 5 at half the size measured slower: a lookup costs
        // more than the distance checks it saves).
        let cell_size = config.leave_radius.max(f32::MIN_POSITIVE);
        let ring = 1;
        Self {
            config,
            cell_size,
            ring,
            cells: HashMap::new(),
            members: HashMap::default(),
            recomputes: 0,
            kept: Vec::new(),
            entered_shares: Vec::new(),
        }
    }

    /// Players in it.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Whether nobody is.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Views recomputed so far.
    pub fn recomputes(&self) -> u64 {
        self.recomputes
    }

    /// Who player `id` sees.
    pub fn seen_by(&self, id: u32) -> impl Iterator<Item = u32> + '_ {
        self.members
            .get(&id)
            .into_iter()
            .flat_map(|m| m.seen.keys().copied())
    }

    fn ground(&self, position: [f32; 3]) -> [f32; 2] {
        [position[self.config.axes[0]], position[self.config.axes[1]]]
    }

    fn cell_of(&self, at: [f32; 2]) -> Cell {
        // Saturating casts: a far-flung (or non-finite) position lands in
        // an edge cell, never panics.
        cell_key(
            (at[0] / self.cell_size).floor() as i32,
            (at[1] / self.cell_size).floor() as i32,
        )
    }

    /// A player enters the world at `position`: who it sees.
    pub fn enter(&mut self, id: u32, position: [f32; 3]) -> ViewChanges {
        let at = self.ground(position);
        let cell = self.cell_of(at);
        self.cells.entry(cell).or_default().push(Slot { id, at });
        self.members.insert(
            id,
            Member {
                at,
                anchor: at,
                cell,
                seen: HashMap::default(),
            },
        );
        self.recompute(id)
    }

    /// A player moved to `position`: what changed in the views, and who
    /// gets this transform (by distance band, each pair's priority built
    /// up so that a far player hears every fourth, never none).
    pub fn moved(&mut self, id: u32, position: [f32; 3]) -> (ViewChanges, Vec<u32>) {
        let at = self.ground(position);
        let Some(member) = self.members.get_mut(&id) else {
            return (self.enter(id, position), Vec::new());
        };
        member.at = at;
        let old_cell = member.cell;
        let moved2 = distance2(member.anchor, at);
        let new_cell = self.cell_of(at);
        let changes = if new_cell != old_cell {
            self.move_cell(id, old_cell, new_cell, at);
            self.recompute(id)
        } else {
            if let Some(slot) = self
                .cells
                .get_mut(&old_cell)
                .and_then(|slots| slots.iter_mut().find(|s| s.id == id))
            {
                slot.at = at;
            }
            if moved2 >= self.config.min_move.powi(2) {
                self.recompute(id)
            } else {
                ViewChanges::default()
            }
        };
        (changes, self.recipients(id))
    }

    /// A player left the world: who saw it.
    pub fn leave(&mut self, id: u32) -> Vec<u32> {
        let Some(member) = self.members.remove(&id) else {
            return Vec::new();
        };
        if let Some(slots) = self.cells.get_mut(&member.cell) {
            slots.retain(|s| s.id != id);
            if slots.is_empty() {
                self.cells.remove(&member.cell);
            }
        }
        let watchers: Vec<u32> = member.seen.keys().copied().collect();
        for other in &watchers {
            if let Some(other) = self.members.get_mut(other) {
                other.seen.remove(&id);
            }
        }
        watchers
    }

    fn move_cell(&mut self, id: u32, from: Cell, to: Cell, at: [f32; 2]) {
        if let Some(slots) = self.cells.get_mut(&from) {
            if let Some(i) = slots.iter().position(|s| s.id == id) {
                slots.swap_remove(i);
            }
            if slots.is_empty() {
                self.cells.remove(&from);
            }
        }
        self.cells.entry(to).or_default().push(Slot { id, at });
        if let Some(member) = self.members.get_mut(&id) {
            member.cell = to;
        }
    }

    /// The mover's view against everyone near it and everyone it saw.
    /// Neighbours' positions come from the cells scanned (a neighbour not
    /// found within the leave radius there is past it): no lookup per
    /// neighbour, which in a world of thousands is a cache miss each.
    fn recompute(&mut self, id: u32) -> ViewChanges {
        self.recomputes += 1;
        let Some(me) = self.members.get(&id) else {
            return ViewChanges::default();
        };
        let (at, (cx, cz)) = (me.at, cell_coords(me.cell));
        let enter2 = self.config.enter_radius.powi(2);
        let leave2 = self.config.leave_radius.powi(2);
        let mut changes = ViewChanges::default();
        let mut entered_shares = std::mem::take(&mut self.entered_shares);
        entered_shares.clear();
        // Neighbours still in view, and those whose band changed.
        let mut kept = std::mem::take(&mut self.kept);
        kept.clear();
        let mut rebanded = Vec::new();
        for dx in -self.ring..=self.ring {
            for dz in -self.ring..=self.ring {
                let cell = cell_key(cx.saturating_add(dx), cz.saturating_add(dz));
                let Some(slots) = self.cells.get(&cell) else {
                    continue;
                };
                for slot in slots {
                    // The distance first: most of the scanned are too far
                    // to matter, and cost no lookup.
                    let d2 = distance2(at, slot.at);
                    if d2 > leave2 || slot.id == id {
                        continue;
                    }
                    match me.seen.get(&slot.id) {
                        Some(pair) => {
                            kept.push(slot.id);
                            let share = self.config.share(d2);
                            if pair.share != share {
                                rebanded.push((slot.id, share));
                            }
                        }
                        None if d2 <= enter2 => {
                            changes.entered.push((id, slot.id));
                            entered_shares.push(self.config.share(d2));
                        }
                        None => {}
                    }
                }
            }
        }
        if kept.len() < me.seen.len() {
            // The others went past the leave radius (or out of the cells
            // around, which is further).
            kept.sort_unstable();
            for &other in me.seen.keys() {
                if kept.binary_search(&other).is_err() {
                    changes.left.push((id, other));
                }
            }
            changes.left.sort_unstable();
        }
        for (&(mover, other), &share) in changes.entered.iter().zip(&entered_shares) {
            // The mover's next transform goes to the other at once; the
            // other's state reaches the mover with the entry (the driver
            // shows it where the other stands), so its priority starts
            // from nothing.
            self.set_pair(
                mover,
                other,
                Some(Pair {
                    priority: 1.0,
                    share,
                }),
            );
            self.set_pair(
                other,
                mover,
                Some(Pair {
                    priority: 0.0,
                    share,
                }),
            );
        }
        for &(mover, other) in &changes.left {
            self.set_pair(mover, other, None);
            self.set_pair(other, mover, None);
        }
        for (other, share) in rebanded {
            for (from, to) in [(id, other), (other, id)] {
                if let Some(pair) = self
                    .members
                    .get_mut(&from)
                    .and_then(|m| m.seen.get_mut(&to))
                {
                    pair.share = share;
                }
            }
        }
        self.members.get_mut(&id).expect("checked above").anchor = at;
        self.kept = kept;
        self.entered_shares = entered_shares;
        changes
    }

    /// Sets (or, with `None`, ends) how `from`'s transforms go to `to`.
    fn set_pair(&mut self, from: u32, to: u32, pair: Option<Pair>) {
        if let Some(member) = self.members.get_mut(&from) {
            match pair {
                Some(pair) => {
                    member.seen.insert(to, pair);
                }
                None => {
                    member.seen.remove(&to);
                }
            }
        }
    }

    /// Who gets `id`'s transform now: each neighbour's priority grows by
    /// its band's share; it gets the transform when it reaches 1. In the
    /// table's order (the same for the same inputs: the ids' hasher has no
    /// random seed, so a replay gives the same lists).
    pub(crate) fn recipients(&mut self, id: u32) -> Vec<u32> {
        let Some(me) = self.members.get_mut(&id) else {
            return Vec::new();
        };
        let mut out = Vec::with_capacity(me.seen.len());
        for (&other, pair) in &mut me.seen {
            pair.priority += pair.share;
            if pair.priority >= 1.0 {
                pair.priority -= 1.0;
                out.push(other);
            }
        }
        out
    }
}

fn distance2(a: [f32; 2], b: [f32; 2]) -> f32 {
    let (dx, dz) = (a[0] - b[0], a[1] - b[1]);
    dx * dx + dz * dz
}
