//! Named links for common cases, each way the same unless said.

use std::time::Duration;

use crate::model::{GilbertElliott, LinkConfig};

/// A named link: what `--profile NAME` gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Profile {
    /// Its name.
    pub name: &'static str,
    /// What it stands for.
    pub about: &'static str,
}

/// Every profile, by name.
pub const PROFILES: &[Profile] = &[
    Profile {
        name: "home",
        about: "a good home link: 20 ms each way, 2 ms jitter, 0.1 % loss, 50 Mbit/s",
    },
    Profile {
        name: "wifi",
        about: "a congested Wi-Fi: 10 ms each way, 15 ms jitter, 1 % loss in bursts, 10 Mbit/s",
    },
    Profile {
        name: "mobile",
        about: "a mobile link: 40 ms each way, 25 ms jitter, 2 % loss in bursts, 4 Mbit/s",
    },
    Profile {
        name: "transatlantic",
        about: "across an ocean: 45 ms each way, 3 ms jitter, 0.5 % loss",
    },
];

/// The link of profile `name` (both ways), or `None`.
pub fn profile(name: &str) -> Option<LinkConfig> {
    let ms = Duration::from_millis;
    let mbit = |n: u64| Some(n * 1_000_000 / 8);
    let bursts = |enter: f64| {
        Some(GilbertElliott {
            p_enter_bad: enter,
            p_leave_bad: 0.3,
            loss_good: 0.0,
            loss_bad: 0.5,
        })
    };
    let config = match name {
        "home" => LinkConfig {
            delay: ms(20),
            jitter: ms(2),
            loss: 0.001,
            bandwidth: mbit(50),
            ..LinkConfig::default()
        },
        "wifi" => LinkConfig {
            delay: ms(10),
            jitter: ms(15),
            // Bad 0.006 / (0.006 + 0.3) of the time (2 %), half lost there:
            // 1 % in all, in runs of about three packets.
            bursts: bursts(0.006),
            bandwidth: mbit(10),
            ..LinkConfig::default()
        },
        "mobile" => LinkConfig {
            delay: ms(40),
            jitter: ms(25),
            // Bad 4 % of the time: 2 % lost in all.
            bursts: bursts(0.013),
            bandwidth: mbit(4),
            ..LinkConfig::default()
        },
        "transatlantic" => LinkConfig {
            delay: ms(45),
            jitter: ms(3),
            loss: 0.005,
            ..LinkConfig::default()
        },
        _ => return None,
    };
    Some(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_profile_listed_has_a_link_and_no_other_name_does() {
        for p in PROFILES {
            assert!(profile(p.name).is_some(), "{}", p.name);
        }
        assert!(profile("moon").is_none());
    }
}
