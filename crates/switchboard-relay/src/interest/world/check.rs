//! A world's own invariants, checked before a world read back from a
//! snapshot is used (and by the tests after every call).

use super::{around, World};

impl World {
    /// Checks the layout's own invariants (a world read back from a
    /// snapshot is checked before it is used): the index and the slab
    /// agree, every pair has its mirror where `back` says, every player
    /// sits once in each neighbourhood around its cell and nowhere else,
    /// free slab numbers are nobody's, and no mark is from a recompute to
    /// come.
    pub(crate) fn check(&self) -> Result<(), String> {
        self.config.check().map_err(|why| why.to_string())?;
        if self.members.len() != self.hot.len() {
            return Err("the slab and its positions differ in length".into());
        }
        if self.hot.iter().any(|hot| hot.mark > self.epoch) {
            return Err("a mark from a recompute to come".into());
        }
        let live = |m: u32| {
            self.members
                .get(m as usize)
                .filter(|member| self.index.get(&member.id) == Some(&m))
        };
        for (&id, &m) in &self.index {
            let member = live(m).ok_or(format!("player {id}: not in the slab"))?;
            for (place, pair) in member.seen.iter().enumerate() {
                let mirror = live(pair.member)
                    .and_then(|other| other.seen.get(pair.back as usize))
                    .ok_or(format!("player {id}: a pair without its mirror"))?;
                if (mirror.member, mirror.back) != (m, place as u32)
                    || self.index.get(&pair.id) != Some(&pair.member)
                {
                    return Err(format!("player {id}: a pair whose mirror disagrees"));
                }
            }
            for cell in around(member.cell) {
                let times = self
                    .neighbourhoods
                    .get(&cell)
                    .map_or(0, |members| members.iter().filter(|&&n| n == m).count());
                if times != 1 {
                    return Err(format!("player {id}: not once in a neighbourhood of its"));
                }
            }
        }
        let listed: usize = self.neighbourhoods.values().map(Vec::len).sum();
        if listed != 9 * self.index.len() {
            return Err("a neighbourhood lists someone not near it".into());
        }
        let mut free = self.free.clone();
        free.sort_unstable();
        free.dedup();
        if free.len() != self.free.len()
            || free
                .iter()
                .any(|&m| m as usize >= self.members.len() || live(m).is_some())
        {
            return Err("a free slab number is taken, twice free, or past the slab".into());
        }
        Ok(())
    }
}

#[cfg(test)]
impl World {
    /// [`check`](Self::check), as a test's assertion.
    pub(crate) fn check_layout(&self) {
        if let Err(why) = self.check() {
            panic!("{why}");
        }
    }
}
