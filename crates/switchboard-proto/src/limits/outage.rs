//! One voice per outage: a component that depends on something outside its
//! process (a store, a directory) says "unavailable" once when its calls
//! start failing, and "reachable again" once when one succeeds, with how
//! many failed in between, instead of a line per failed call.

use std::fmt::Display;

/// The state of one dependency, as its log sees it.
#[derive(Debug)]
pub struct Outage {
    what: &'static str,
    /// Calls failed in the current outage; `None` while all is well.
    failed: Option<u64>,
}

impl Outage {
    /// `what` names the dependency in the log ("room directory").
    pub fn new(what: &'static str) -> Self {
        Self { what, failed: None }
    }

    /// A call failed with `err`. The first failure of an outage is logged
    /// (a warning) and returns `true`; later ones are only counted.
    pub fn failed(&mut self, err: &dyn Display) -> bool {
        match &mut self.failed {
            Some(count) => {
                *count += 1;
                false
            }
            None => {
                self.failed = Some(1);
                tracing::warn!(%err, "{}: unavailable", self.what);
                true
            }
        }
    }

    /// A call succeeded. If that ends an outage, it is logged (with how
    /// many calls failed) and the count is returned.
    pub fn succeeded(&mut self) -> Option<u64> {
        let failed = self.failed.take()?;
        tracing::info!(failed_calls = failed, "{}: reachable again", self.what);
        Some(failed)
    }

    /// Whether the last call failed.
    pub fn is_down(&self) -> bool {
        self.failed.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outage_is_told_once_and_its_end_once_with_the_count() {
        let mut outage = Outage::new("store");
        assert_eq!(
            outage.succeeded(),
            None,
            "nothing to tell while all is well"
        );
        assert!(outage.failed(&"broken pipe"));
        for _ in 0..19 {
            assert!(!outage.failed(&"broken pipe"), "one voice per outage");
        }
        assert!(outage.is_down());
        assert_eq!(outage.succeeded(), Some(20));
        assert_eq!(outage.succeeded(), None);
        assert!(outage.failed(&"refused"), "a new outage is told again");
    }
}
