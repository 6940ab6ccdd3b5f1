//! Open-file descriptors: every connection holds one, and every listener of
//! a process (game, WebSocket, AxisPy, admin, JSON) draws on the same
//! limit. A server raises its soft limit to the hard one at start, and
//! shares what it has among its listeners so that none can take them all.

/// The process's open-file limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenFiles {
    /// The soft limit before the raise.
    pub before: u64,
    /// The soft limit now: what the process may open.
    pub soft: u64,
    /// The hard limit (the most the soft one may be raised to).
    pub hard: u64,
}

/// Raises the soft open-file limit to the hard limit (capped at 1,048,576),
/// and logs the figure. On systems without the limit, reports it as
/// unlimited.
pub fn raise_open_files_limit() -> OpenFiles {
    let files = raise();
    if files.soft > files.before {
        tracing::info!(
            open_files = files.soft,
            was = files.before,
            "open-file limit raised to the hard limit"
        );
    } else {
        tracing::info!(open_files = files.soft, "open-file limit");
    }
    files
}

#[cfg(unix)]
// `rlim_t` is `u64` here, not on every Unix.
#[allow(clippy::unnecessary_cast)]
fn raise() -> OpenFiles {
    const MOST: u64 = 1 << 20;
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes a plain struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        let unknown = 1024;
        return OpenFiles {
            before: unknown,
            soft: unknown,
            hard: unknown,
        };
    }
    let before = limit.rlim_cur as u64;
    let hard = limit.rlim_max as u64;
    let wanted = hard.min(MOST).max(before);
    let mut soft = before;
    if wanted > before {
        let raised = libc::rlimit {
            rlim_cur: wanted as libc::rlim_t,
            rlim_max: limit.rlim_max,
        };
        // SAFETY: setrlimit reads a plain struct we own.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            soft = wanted;
        }
    }
    OpenFiles { before, soft, hard }
}

#[cfg(not(unix))]
fn raise() -> OpenFiles {
    OpenFiles {
        before: u64::MAX,
        soft: u64::MAX,
        hard: u64::MAX,
    }
}

/// Shares `limit` descriptors among a process's listeners: when their
/// total caps (`caps`: a name and the cap to adjust) plus `reserve` (files,
/// Redis, the log) would pass the limit, each cap is cut in proportion, so
/// that one listener filled to its cap still leaves the others theirs.
/// Returns whether any cap was cut (and logs it).
pub fn share_descriptors(limit: u64, reserve: u64, caps: &mut [(&str, &mut usize)]) -> bool {
    let total: u64 = caps.iter().map(|(_, cap)| **cap as u64).sum();
    let room = limit.saturating_sub(reserve).max(caps.len() as u64);
    if total <= room {
        return false;
    }
    for (name, cap) in caps.iter_mut() {
        let shared = (**cap as u64 * room / total).max(1) as usize;
        tracing::warn!(
            listener = *name,
            was = **cap,
            now = shared,
            open_files = limit,
            "connection cap cut to fit the open-file limit (raise the hard limit to keep it)"
        );
        **cap = shared;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_soft_limit_is_raised_to_the_hard_one() {
        let files = raise_open_files_limit();
        assert!(files.soft >= files.before);
        assert!(files.soft == files.hard || files.soft == 1 << 20 || files.hard < files.before);
    }

    #[test]
    fn caps_past_the_limit_are_cut_in_proportion_and_fit() {
        let (mut game, mut axispy, mut admin) = (1024, 1024, 64);
        let cut = share_descriptors(
            1024,
            64,
            &mut [
                ("game", &mut game),
                ("axispy", &mut axispy),
                ("admin", &mut admin),
            ],
        );
        assert!(cut);
        assert!(game + axispy + admin <= 1024 - 64);
        assert_eq!((game, axispy, admin), (465, 465, 29));
        let (mut a, mut b) = (10, 20);
        assert!(!share_descriptors(
            1024,
            64,
            &mut [("a", &mut a), ("b", &mut b)]
        ));
        assert_eq!((a, b), (10, 20));
    }
}
