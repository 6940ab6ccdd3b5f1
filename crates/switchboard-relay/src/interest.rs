//! Interest by distance inside a zone (no IO): who sees whom, kept in a
//! spatial hash on the ground plane, with separate enter and leave radii so
//! a player on the edge does not flicker, recomputed only for a player that
//! moved past `min_move` or changed cell (a player standing still costs
//! nothing), and relayed at a rate that falls with distance: every
//! transform near, every second one further, every fourth at the edge, by a
//! priority accumulator per pair so that nobody starves.
//!
//! ```text
//!   cell = leave_radius / 2          a recompute scans the 5 x 5 cells
//!   +----+----+----+----+----+       around the mover (they hold every
//!   |    |    |    |    |    |       player within leave_radius), and
//!   +----+----+----+----+----+       the mover's current neighbours:
//!   |    |    | .. |    |    |         not seen, within enter_radius: enters
//!   +----+----+-P--+----+----+         seen, past leave_radius: leaves
//!   ...                                (in between: stays as it was)
//! ```
//!
//! Visibility is symmetric (distance is), so one recompute updates both
//! sides of every pair it touches.

use std::collections::HashMap;

use switchboard::socket::IdBuildHasher;

/// How interest by distance works in a zone; each field says its default.
#[derive(Debug, Clone, PartialEq)]
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

    /// How often a transform goes to a player this far away: 1, 2 or 4.
    fn divisor(&self, distance2: f32) -> f32 {
        if distance2 <= self.full_rate_within * self.full_rate_within {
            1.0
        } else if distance2 <= self.half_rate_within * self.half_rate_within {
            2.0
        } else {
            4.0
        }
    }
}

type Cell = (i32, i32);

/// A player in the world.
#[derive(Debug)]
struct Member {
    at: [f32; 2],
    /// Where its view was last computed.
    anchor: [f32; 2],
    cell: Cell,
    /// Who it sees (and who sees it), each with the priority its own
    /// transforms have built up towards that player.
    seen: HashMap<u32, f32, IdBuildHasher>,
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
    cells: HashMap<Cell, Vec<u32>>,
    members: HashMap<u32, Member, IdBuildHasher>,
    /// Views recomputed so far (what standing still saves).
    recomputes: u64,
}

impl World {
    /// An empty world (the config is checked by whoever built it).
    pub fn new(config: InterestConfig) -> Self {
        let cell_size = (config.leave_radius / 2.0).max(f32::MIN_POSITIVE);
        let ring = (config.leave_radius / cell_size).ceil() as i32;
        Self {
            config,
            cell_size,
            ring,
            cells: HashMap::new(),
            members: HashMap::default(),
            recomputes: 0,
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
        (
            (at[0] / self.cell_size).floor() as i32,
            (at[1] / self.cell_size).floor() as i32,
        )
    }

    /// A player enters the world at `position`: who it sees.
    pub fn enter(&mut self, id: u32, position: [f32; 3]) -> ViewChanges {
        let at = self.ground(position);
        let cell = self.cell_of(at);
        self.cells.entry(cell).or_default().push(id);
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
        let changes = if new_cell != old_cell || moved2 >= self.config.min_move.powi(2) {
            if new_cell != old_cell {
                self.move_cell(id, old_cell, new_cell);
            }
            self.recompute(id)
        } else {
            ViewChanges::default()
        };
        (changes, self.recipients(id))
    }

    /// A player left the world: who saw it.
    pub fn leave(&mut self, id: u32) -> Vec<u32> {
        let Some(member) = self.members.remove(&id) else {
            return Vec::new();
        };
        if let Some(ids) = self.cells.get_mut(&member.cell) {
            ids.retain(|i| *i != id);
            if ids.is_empty() {
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

    fn move_cell(&mut self, id: u32, from: Cell, to: Cell) {
        if let Some(ids) = self.cells.get_mut(&from) {
            if let Some(at) = ids.iter().position(|i| *i == id) {
                ids.swap_remove(at);
            }
            if ids.is_empty() {
                self.cells.remove(&from);
            }
        }
        self.cells.entry(to).or_default().push(id);
        if let Some(member) = self.members.get_mut(&id) {
            member.cell = to;
        }
    }

    /// The mover's view against everyone near it and everyone it saw.
    fn recompute(&mut self, id: u32) -> ViewChanges {
        self.recomputes += 1;
        let Some(me) = self.members.get(&id) else {
            return ViewChanges::default();
        };
        let (at, (cx, cz)) = (me.at, me.cell);
        let enter2 = self.config.enter_radius.powi(2);
        let leave2 = self.config.leave_radius.powi(2);
        let mut changes = ViewChanges::default();
        for dx in -self.ring..=self.ring {
            for dz in -self.ring..=self.ring {
                let cell = (cx.saturating_add(dx), cz.saturating_add(dz));
                let Some(ids) = self.cells.get(&cell) else {
                    continue;
                };
                for &other in ids {
                    if other == id || me.seen.contains_key(&other) {
                        continue;
                    }
                    let Some(them) = self.members.get(&other) else {
                        continue;
                    };
                    if distance2(at, them.at) <= enter2 {
                        changes.entered.push((id, other));
                    }
                }
            }
        }
        for &other in me.seen.keys() {
            let gone = self
                .members
                .get(&other)
                .is_none_or(|them| distance2(at, them.at) > leave2);
            if gone {
                changes.left.push((id, other));
            }
        }
        for &(mover, other) in &changes.entered {
            // The mover's next transform goes to the other at once; the
            // other's state reaches the mover with the entry (the driver
            // shows it where the other stands), so its priority starts
            // from nothing.
            self.set_priority(mover, other, Some(1.0));
            self.set_priority(other, mover, Some(0.0));
        }
        for &(mover, other) in &changes.left {
            self.set_priority(mover, other, None);
            self.set_priority(other, mover, None);
        }
        self.members.get_mut(&id).expect("checked above").anchor = at;
        changes
    }

    /// Sets `from`'s priority towards `to` (`None`: `to` is out of view).
    fn set_priority(&mut self, from: u32, to: u32, priority: Option<f32>) {
        if let Some(member) = self.members.get_mut(&from) {
            match priority {
                Some(p) => {
                    member.seen.insert(to, p);
                }
                None => {
                    member.seen.remove(&to);
                }
            }
        }
    }

    /// Who gets `id`'s transform now: each neighbour's priority grows by
    /// its band's share; it gets the transform when it reaches 1.
    pub(crate) fn recipients(&mut self, id: u32) -> Vec<u32> {
        let Some(me) = self.members.get(&id) else {
            return Vec::new();
        };
        let at = me.at;
        let shares: Vec<(u32, f32)> = me
            .seen
            .keys()
            .filter_map(|other| {
                let them = self.members.get(other)?;
                Some((*other, 1.0 / self.config.divisor(distance2(at, them.at))))
            })
            .collect();
        let me = self.members.get_mut(&id).expect("checked above");
        let mut out = Vec::with_capacity(shares.len());
        for (other, share) in shares {
            if let Some(priority) = me.seen.get_mut(&other) {
                *priority += share;
                if *priority >= 1.0 {
                    *priority -= 1.0;
                    out.push(other);
                }
            }
        }
        out.sort_unstable();
        out
    }
}

fn distance2(a: [f32; 2], b: [f32; 2]) -> f32 {
    let (dx, dz) = (a[0] - b[0], a[1] - b[1]);
    dx * dx + dz * dz
}
