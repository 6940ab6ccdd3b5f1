//! What a player is told when its connection comes back: the truth about
//! the game. "Same game" only when the server resumed the game the player
//! was in (its nation, a turn it knows); otherwise what was lost, and why.
//!
//! ```text
//!  lost ─▶ remember (started, turn, nation)
//!  welcomed, session resumed ─▶ wait for the first view or lobby, then compare
//!  welcomed, new session ─────▶ "back as a new player: ... could not be resumed"
//! ```

use crate::client::Seen;
use crate::scenario::NationId;

/// What the player knew when its connection was lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Before {
    started: bool,
    turn: u32,
    nation: Option<NationId>,
}

/// The rejoin's state.
#[derive(Debug, Default)]
pub(crate) struct Rejoin {
    before: Option<Before>,
    /// Welcomed back into its session: the next view or lobby decides
    /// (the counts of views and lobbies heard when welcomed).
    checking: Option<(u64, u64)>,
}

impl Rejoin {
    /// The connection was lost: what the player knew then.
    pub(crate) fn lost(&mut self, seen: &Seen) {
        if self.before.is_some() {
            // Lost again before it heard anything: it knew no more.
            return;
        }
        let started = seen.lobby.as_ref().is_some_and(|l| l.started) || seen.view.is_some();
        self.before = Some(Before {
            started,
            turn: seen.view.as_ref().map_or(0, |v| v.turn),
            nation: seen.view.as_ref().and_then(|v| v.you),
        });
        self.checking = None;
    }

    /// Welcomed again; `resumed` says whether the server knew the session.
    /// A new session after a loss is told at once.
    pub(crate) fn welcomed(&mut self, resumed: bool, seen: &Seen) -> Option<String> {
        self.before?;
        if resumed {
            self.checking = Some((seen.views, seen.lobbies));
            return None;
        }
        self.before = None;
        Some(
            "back as a new player: the server did not know your session, so the game could \
             not be resumed (its server lost it). Pick a nation to play on, or q to quit"
                .into(),
        )
    }

    /// After a resumed welcome, the first view or lobby heard: whether the
    /// game is the one the player was in.
    pub(crate) fn heard(&mut self, seen: &Seen) -> Option<String> {
        let (views, lobbies) = self.checking?;
        let (fresh_view, fresh_lobby) = (seen.views > views, seen.lobbies > lobbies);
        if !(fresh_view || fresh_lobby) {
            return None;
        }
        let before = self.before.take()?;
        self.checking = None;
        let lobby_only =
            fresh_lobby && seen.lobby.as_ref().is_some_and(|l| !l.started) && !fresh_view;
        if before.started && lobby_only {
            return Some(
                "reconnected, but the game could not be resumed: the server has a new game's \
                 lobby (the one you played was lost). Pick a nation to play the new game, or \
                 q to quit"
                    .into(),
            );
        }
        let Some(view) = seen.view.as_ref().filter(|_| fresh_view) else {
            return Some("reconnected: same game, in its lobby".into());
        };
        if view.you != before.nation {
            return Some(format!(
                "reconnected, but not on your nation: the server holds a game where you are {}",
                view.you
                    .map_or("a spectator".to_string(), |n| format!("nation {}", n.0))
            ));
        }
        if view.turn < before.turn {
            return Some(format!(
                "reconnected: same nation, same game, resumed at turn {} (its last checkpoint): \
                 orders given in turn {} are lost",
                view.turn, before.turn
            ));
        }
        Some(format!(
            "reconnected: same nation, same game (turn {})",
            view.turn
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{LobbyView, NationView};

    fn view(turn: u32, you: Option<NationId>) -> NationView {
        NationView {
            scenario: "valley".into(),
            turn,
            you,
            width: 0,
            height: 0,
            tiles: Vec::new(),
            units: Vec::new(),
            nations: Vec::new(),
            winner: None,
        }
    }

    /// A player in a started game at `turn`, having heard `heard` views.
    fn playing(turn: u32, heard: u64) -> Seen {
        Seen {
            view: Some(view(turn, Some(NationId(0)))),
            views: heard,
            ..Seen::default()
        }
    }

    #[test]
    fn same_game_is_said_only_when_the_nation_and_turn_are_there() {
        let mut rejoin = Rejoin::default();
        rejoin.lost(&playing(3, 5));
        assert_eq!(
            rejoin.welcomed(true, &playing(3, 5)),
            None,
            "wait for the game"
        );
        assert_eq!(rejoin.heard(&playing(3, 5)), None, "no view since");
        let message = rejoin.heard(&playing(3, 6)).unwrap();
        assert_eq!(message, "reconnected: same nation, same game (turn 3)");
        assert_eq!(rejoin.heard(&playing(3, 7)), None, "said once");
    }

    #[test]
    fn a_resume_at_an_earlier_turn_says_what_was_lost() {
        let mut rejoin = Rejoin::default();
        rejoin.lost(&playing(4, 1));
        rejoin.welcomed(true, &playing(4, 1));
        let message = rejoin.heard(&playing(3, 2)).unwrap();
        assert!(message.contains("resumed at turn 3"), "{message}");
        assert!(message.contains("turn 4 are lost"), "{message}");
    }

    #[test]
    fn a_fresh_lobby_after_a_started_game_is_reported_as_a_lost_game() {
        let mut rejoin = Rejoin::default();
        rejoin.lost(&playing(3, 1));
        rejoin.welcomed(true, &playing(3, 1));
        let lobby = Seen {
            lobby: Some(LobbyView {
                seats: Vec::new(),
                started: false,
                host: None,
                players: Vec::new(),
            }),
            views: 1,
            lobbies: 1,
            ..Seen::default()
        };
        let message = rejoin.heard(&lobby).unwrap();
        assert!(message.contains("could not be resumed"), "{message}");
        assert!(!message.contains("same game"), "{message}");
    }

    #[test]
    fn a_new_session_after_a_loss_is_told_at_once() {
        let mut rejoin = Rejoin::default();
        assert_eq!(
            rejoin.welcomed(false, &Seen::default()),
            None,
            "a first join is no rejoin"
        );
        rejoin.lost(&playing(2, 1));
        let message = rejoin.welcomed(false, &playing(2, 1)).unwrap();
        assert!(message.contains("could not be resumed"), "{message}");
    }
}
