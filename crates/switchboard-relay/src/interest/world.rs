//! [`World`]: a zone's players by place. Laid out for a recompute that
//! touches as little memory as it can, since in a world of thousands each
//! table lookup is a cache miss:
//!
//! - players live in a slab (`members`, indexed by a small number), found
//!   by id once per call;
//! - what a scan reads of each player, its position and its mark, sits in
//!   one dense array by slab number (`hot`: 16 bytes a player, 160 KB for
//!   10,000, which stays in the processor's cache);
//! - each cell keeps the slab numbers of everyone in the 3 x 3 cells
//!   around it (its neighbourhood), so a scan is one lookup and one short
//!   array; a player changing cell (rare next to moving) updates eighteen;
//! - a player's view is a short vector of pairs, each knowing where its
//!   mirror sits in the other's vector (`back`), so a pair is linked or
//!   cut from both sides in constant time;
//! - a pair's distance band is read when a transform is relayed, from the
//!   two positions in `hot`: nothing to update on either side when a
//!   neighbour crosses a band (which costs two cache misses a pair);
//! - a recompute marks its player's current neighbours in `hot` and checks
//!   each scanned player's mark, instead of a hash lookup per neighbour;
//! - the scan first keeps those within the leave radius without a branch
//!   (which of them are is a coin toss for the processor's predictor).
//!
//! `cargo bench -p switchboard-relay --bench interest` measures it
//! (`docs/PERFORMANCE.md`, "Interest by distance at scale").

use std::collections::HashMap;

use switchboard::socket::IdBuildHasher;

use super::InterestConfig;

mod check;

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

/// What a scan reads of a player.
#[derive(Debug, Default, Clone, Copy, serde::Serialize, serde::Deserialize)]
struct Hot {
    at: [f32; 2],
    /// The recompute that last marked it as seen by its mover, and its
    /// place in the mover's `seen`.
    mark: u32,
    place: u32,
}

/// A player in the world.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct Member {
    id: u32,
    /// Where its view was last computed.
    anchor: [f32; 2],
    cell: Cell,
    /// Who it sees (and who sees it), and how its transforms go to each.
    seen: Vec<Seen>,
}

/// One side of a pair that see each other.
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize)]
struct Seen {
    /// The other's slab number and id.
    member: u32,
    id: u32,
    /// Where the other side of this pair sits in the other's `seen`.
    back: u32,
    /// Built up by each transform by its distance band's share (1, 1/2 or
    /// 1/4); one is sent when it reaches 1.
    priority: f32,
}

/// What a move or an entry changed: pairs that came into view of each
/// other, pairs that went out of it, the mover first in each. On an
/// entry the driver shows the mover where the other stands; the other
/// gets the mover's transform as one of its recipients.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ViewChanges {
    /// (a, b): a and b see each other now.
    pub entered: Vec<(u32, u32)>,
    /// (a, b): a and b no longer see each other, by b's id.
    pub left: Vec<(u32, u32)>,
}

/// The players of one zone, by place. It serializes whole (a relay's
/// snapshot, for a recording started while it runs), views in their order,
/// so that the restored world answers as this one would.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct World {
    config: InterestConfig,
    cell_size: f32,
    /// By cell: the slab numbers of everyone in the 3 x 3 cells around.
    neighbourhoods: HashMap<Cell, Vec<u32>>,
    /// Player id → slab number.
    index: HashMap<u32, u32, IdBuildHasher>,
    members: Vec<Member>,
    hot: Vec<Hot>,
    /// Slab numbers free for the next player.
    free: Vec<u32>,
    /// The last recompute's mark.
    epoch: u32,
    /// Views recomputed so far (what standing still saves).
    recomputes: u64,
    /// Scratch space a recompute reuses (no allocation per move).
    #[serde(skip)]
    scratch: Scratch,
}

#[derive(Debug, Default)]
struct Scratch {
    /// By place in the mover's `seen`: still within the leave radius.
    kept: Vec<bool>,
    /// Slab numbers of those who came into view.
    entered: Vec<u32>,
    /// Places in `seen` that go.
    gone: Vec<u32>,
    /// (slab number, squared distance) of the scanned within the leave
    /// radius, first in the array.
    within: Vec<(u32, f32)>,
}

impl World {
    /// An empty world (the config is checked by whoever built it).
    pub fn new(config: InterestConfig) -> Self {
        // Cells as wide as the leave radius: the 3 x 3 around a mover hold
        // everyone within it. Smaller cells scan less ground but cost more
        // lookups (5 x 5 at half the size measured slower: a lookup costs
        // more than the distance checks it saves).
        let cell_size = config.leave_radius.max(f32::MIN_POSITIVE);
        Self {
            config,
            cell_size,
            neighbourhoods: HashMap::new(),
            index: HashMap::default(),
            members: Vec::new(),
            hot: Vec::new(),
            free: Vec::new(),
            epoch: 0,
            recomputes: 0,
            scratch: Scratch::default(),
        }
    }

    /// Players in it.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// Whether nobody is.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// Views recomputed so far.
    pub fn recomputes(&self) -> u64 {
        self.recomputes
    }

    /// Who player `id` sees.
    pub fn seen_by(&self, id: u32) -> impl Iterator<Item = u32> + '_ {
        self.index
            .get(&id)
            .into_iter()
            .flat_map(|&m| self.members[m as usize].seen.iter().map(|s| s.id))
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

    /// A player enters the world at `position`: who it sees. (A player
    /// already in it is moved there instead.)
    pub fn enter(&mut self, id: u32, position: [f32; 3]) -> ViewChanges {
        if self.index.contains_key(&id) {
            return self.moved(id, position).0;
        }
        let at = self.ground(position);
        let cell = self.cell_of(at);
        let member = match self.free.pop() {
            Some(m) => m,
            None => {
                self.members.push(Member::default());
                self.hot.push(Hot::default());
                (self.members.len() - 1) as u32
            }
        };
        self.members[member as usize] = Member {
            id,
            anchor: at,
            cell,
            seen: std::mem::take(&mut self.members[member as usize].seen),
        };
        self.hot[member as usize].at = at;
        self.index.insert(id, member);
        self.settle(member, cell);
        self.recompute(member)
    }

    /// A player moved to `position`: what changed in the views, and who
    /// gets this transform (by distance band, each pair's priority built
    /// up so that a far player hears every fourth, never none).
    pub fn moved(&mut self, id: u32, position: [f32; 3]) -> (ViewChanges, Vec<u32>) {
        let Some(&m) = self.index.get(&id) else {
            let changes = self.enter(id, position);
            return (changes, self.recipients(id));
        };
        let at = self.ground(position);
        let new_cell = self.cell_of(at);
        self.hot[m as usize].at = at;
        let member = &mut self.members[m as usize];
        let old_cell = member.cell;
        let moved2 = distance2(member.anchor, at);
        let changes = if new_cell != old_cell {
            member.cell = new_cell;
            self.unsettle(m, old_cell);
            self.settle(m, new_cell);
            self.recompute(m)
        } else if moved2 >= self.config.min_move.powi(2) {
            self.recompute(m)
        } else {
            ViewChanges::default()
        };
        (changes, self.recipients_of(m))
    }

    /// A player left the world: who saw it.
    pub fn leave(&mut self, id: u32) -> Vec<u32> {
        let Some(m) = self.index.remove(&id) else {
            return Vec::new();
        };
        self.unsettle(m, self.members[m as usize].cell);
        let mut seen = std::mem::take(&mut self.members[m as usize].seen);
        for pair in &seen {
            self.remove_at(pair.member, pair.back);
        }
        let watchers = seen.iter().map(|pair| pair.id).collect();
        // The slab keeps the vector's room for the next player.
        seen.clear();
        self.members[m as usize].seen = seen;
        self.free.push(m);
        watchers
    }

    /// Puts `m` in the neighbourhoods of the 3 x 3 cells around `cell`.
    fn settle(&mut self, m: u32, cell: Cell) {
        for cell in around(cell) {
            self.neighbourhoods.entry(cell).or_default().push(m);
        }
    }

    /// Takes `m` out of the neighbourhoods around `cell` (an empty one
    /// goes: only cells near players have one).
    fn unsettle(&mut self, m: u32, cell: Cell) {
        for cell in around(cell) {
            if let Some(members) = self.neighbourhoods.get_mut(&cell) {
                if let Some(i) = members.iter().position(|&n| n == m) {
                    members.swap_remove(i);
                }
                if members.is_empty() {
                    self.neighbourhoods.remove(&cell);
                }
            }
        }
    }

    /// Takes place `at` out of `m`'s view; the pair that took its place
    /// is told where it now sits.
    fn remove_at(&mut self, m: u32, at: u32) {
        let seen = &mut self.members[m as usize].seen;
        seen.swap_remove(at as usize);
        if let Some(&moved) = seen.get(at as usize) {
            self.members[moved.member as usize].seen[moved.back as usize].back = at;
        }
    }

    /// Links `a` and `b` (each sees the other), `a`'s side with
    /// `a_priority`.
    fn link(&mut self, a: u32, b: u32, a_priority: f32, b_priority: f32) {
        let (a_at, b_at) = (
            self.members[a as usize].seen.len() as u32,
            self.members[b as usize].seen.len() as u32,
        );
        let (a_id, b_id) = (self.members[a as usize].id, self.members[b as usize].id);
        self.members[a as usize].seen.push(Seen {
            member: b,
            id: b_id,
            back: b_at,
            priority: a_priority,
        });
        self.members[b as usize].seen.push(Seen {
            member: a,
            id: a_id,
            back: a_at,
            priority: b_priority,
        });
    }

    /// The next mark: one per recompute.
    fn next_epoch(&mut self) -> u32 {
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            // After four billion recomputes: old marks could match again.
            self.hot.iter_mut().for_each(|hot| hot.mark = 0);
            self.epoch = 1;
        }
        self.epoch
    }

    /// The mover's view against everyone near it and everyone it saw.
    /// Neighbours' positions come from the cells scanned (a neighbour not
    /// found within the leave radius there is past it), and whether each
    /// was seen from the marks: no lookup per neighbour.
    fn recompute(&mut self, m: u32) -> ViewChanges {
        self.recomputes += 1;
        let epoch = self.next_epoch();
        let me = &self.members[m as usize];
        // Everyone in the 3 x 3 cells around (the player itself among
        // them); most are too far to matter.
        let near = self
            .neighbourhoods
            .get(&me.cell)
            .map_or(&[][..], Vec::as_slice);
        for (place, pair) in me.seen.iter().enumerate() {
            let hot = &mut self.hot[pair.member as usize];
            (hot.mark, hot.place) = (epoch, place as u32);
        }
        let at = self.hot[m as usize].at;
        let enter2 = self.config.enter_radius.powi(2);
        let leave2 = self.config.leave_radius.powi(2);
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.kept.clear();
        scratch.kept.resize(me.seen.len(), false);
        scratch.entered.clear();
        scratch.gone.clear();
        // First without branches: whether a scanned player is within the
        // leave radius is a coin toss the processor cannot predict (a
        // quarter are), and a mispredicted branch a player cost more than
        // the rest of the scan together.
        scratch.within.clear();
        scratch.within.resize(near.len(), (0, 0.0));
        let mut within = 0;
        for &other in near {
            let d2 = distance2(at, self.hot[other as usize].at);
            scratch.within[within] = (other, d2);
            within += usize::from((d2 <= leave2) & (other != m));
        }
        for &(other, d2) in &scratch.within[..within] {
            let hot = self.hot[other as usize];
            if hot.mark == epoch {
                scratch.kept[hot.place as usize] = true;
            } else if d2 <= enter2 {
                scratch.entered.push(other);
            }
        }
        let id = me.id;
        let mut changes = ViewChanges::default();
        // The others went past the leave radius (or out of the cells
        // around, which is further). Cut from the last place down, so the
        // places still to cut do not move.
        scratch.gone.extend(
            (0..scratch.kept.len() as u32)
                .rev()
                .filter(|&place| !scratch.kept[place as usize]),
        );
        for &place in &scratch.gone {
            let pair = self.members[m as usize].seen[place as usize];
            changes.left.push((id, pair.id));
            self.remove_at(pair.member, pair.back);
            self.remove_at(m, place);
        }
        changes.left.sort_unstable();
        for &other in &scratch.entered {
            // The mover's next transform goes to the other at once; the
            // other's state reaches the mover with the entry (the driver
            // shows it where the other stands), so its priority starts
            // from nothing.
            self.link(m, other, 1.0, 0.0);
            changes.entered.push((id, self.members[other as usize].id));
        }
        self.members[m as usize].anchor = at;
        self.scratch = scratch;
        changes
    }

    /// Who gets `id`'s transform now: each neighbour's priority grows by
    /// its band's share; it gets the transform when it reaches 1. In the
    /// view's order (the same for the same inputs, so a replay gives the
    /// same lists).
    pub(crate) fn recipients(&mut self, id: u32) -> Vec<u32> {
        match self.index.get(&id) {
            Some(&m) => self.recipients_of(m),
            None => Vec::new(),
        }
    }

    fn recipients_of(&mut self, m: u32) -> Vec<u32> {
        let at = self.hot[m as usize].at;
        let seen = &mut self.members[m as usize].seen;
        let mut out = Vec::with_capacity(seen.len());
        for pair in seen {
            let there = self.hot[pair.member as usize].at;
            pair.priority += self.config.share(distance2(at, there));
            if pair.priority >= 1.0 {
                pair.priority -= 1.0;
                out.push(pair.id);
            }
        }
        out
    }
}

/// The 3 x 3 cells around `cell`, itself included.
fn around(cell: Cell) -> impl Iterator<Item = Cell> {
    let (x, z) = cell_coords(cell);
    (-1..=1).flat_map(move |dx| {
        (-1..=1).map(move |dz| cell_key(x.saturating_add(dx), z.saturating_add(dz)))
    })
}

fn distance2(a: [f32; 2], b: [f32; 2]) -> f32 {
    let (dx, dz) = (a[0] - b[0], a[1] - b[1]);
    dx * dx + dz * dz
}
