//! The one place an id is admitted to a server, whatever the connection's
//! kind: native sessions (ids the table draws at random) and compatibility
//! clients that choose their own (AxisPy's `player_id`) share one set, so no
//! two players of a server ever go by the same id, and the reserved ids
//! (the server's own) are never anyone's.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::entropy::Entropy;

/// A client's public id: stable across reconnects, shown to other players.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ClientId(pub Uuid);

impl ClientId {
    /// A fresh random id (a version 4 UUID) from `entropy`.
    pub fn from_entropy(entropy: &mut dyn Entropy) -> Self {
        let mut bytes = [0u8; 16];
        entropy.fill(&mut bytes);
        Self(uuid::Builder::from_random_bytes(bytes).into_uuid())
    }

    /// A fresh random id from the OS random source (feature `os-random`).
    #[cfg(feature = "os-random")]
    pub fn random() -> Self {
        let mut bytes = [0u8; 16];
        getrandom::fill(&mut bytes).expect("the OS random source failed");
        Self(uuid::Builder::from_random_bytes(bytes).into_uuid())
    }

    /// The id whose 128 bits are `n`: for tests and tools that need the
    /// same ids every run. A server gives out only random ones.
    pub fn from_u128(n: u128) -> Self {
        Self(Uuid::from_u128(n))
    }
}

impl std::fmt::Display for ClientId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl ClientId {
    /// The id a server speaks as, where a protocol names a sender
    /// (AxisPy's `from` of what the server itself says): never a player's.
    pub const SERVER: ClientId = ClientId(uuid::Uuid::from_u128(
        0x0000_0000_0000_4000_8000_0000_0000_0000,
    ));

    /// Whether no player may ever go by this id: the server's, the nil and
    /// the all-ones ids.
    pub fn is_reserved(&self) -> bool {
        *self == Self::SERVER || self.0.is_nil() || self.0.is_max()
    }
}

/// Why an id was not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IdRefusal {
    /// A reserved id ([`ClientId::is_reserved`]).
    #[error("reserved player id")]
    Reserved,
    /// Another player of this server goes by it.
    #[error("duplicate player id")]
    InUse,
}

/// Every id the players of one server go by. Cloning shares the set.
#[derive(Debug, Clone, Default)]
pub struct PlayerIds(Arc<Mutex<HashSet<ClientId>>>);

impl PlayerIds {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Admits `id` for a client that chose it (a compatibility listener's
    /// player): held until the returned claim is dropped.
    pub fn claim(&self, id: ClientId) -> Result<IdClaim, IdRefusal> {
        self.insert(id)?;
        Ok(IdClaim {
            ids: self.clone(),
            id,
        })
    }

    /// Whether a player of this server goes by `id`.
    pub fn contains(&self, id: ClientId) -> bool {
        self.0.lock().expect("ids lock").contains(&id)
    }

    /// Ids held now.
    pub fn len(&self) -> usize {
        self.0.lock().expect("ids lock").len()
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Admits `id` for a session of the table (released by [`release`]).
    ///
    /// [`release`]: Self::release
    pub(crate) fn insert(&self, id: ClientId) -> Result<(), IdRefusal> {
        if id.is_reserved() {
            return Err(IdRefusal::Reserved);
        }
        if !self.0.lock().expect("ids lock").insert(id) {
            return Err(IdRefusal::InUse);
        }
        Ok(())
    }

    pub(crate) fn release(&self, id: ClientId) {
        self.0.lock().expect("ids lock").remove(&id);
    }
}

/// A compatibility client's hold on its id; dropping it frees the id.
#[derive(Debug)]
pub struct IdClaim {
    ids: PlayerIds,
    id: ClientId,
}

impl IdClaim {
    /// The id held.
    pub fn id(&self) -> ClientId {
        self.id
    }
}

impl Drop for IdClaim {
    fn drop(&mut self) {
        self.ids.release(self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_ids_are_never_admitted_and_an_id_is_held_once() {
        let ids = PlayerIds::new();
        assert_eq!(
            ids.claim(ClientId::SERVER).unwrap_err(),
            IdRefusal::Reserved
        );
        assert_eq!(
            ids.claim(ClientId::from_u128(0)).unwrap_err(),
            IdRefusal::Reserved
        );
        assert_eq!(
            ClientId::SERVER.to_string(),
            "00000000-0000-4000-8000-000000000000"
        );
        let a = ClientId::from_u128(7);
        let claim = ids.claim(a).unwrap();
        assert_eq!(ids.claim(a).unwrap_err(), IdRefusal::InUse);
        assert_eq!(ids.insert(a), Err(IdRefusal::InUse), "a session neither");
        drop(claim);
        assert!(!ids.contains(a));
        assert!(ids.claim(a).is_ok());
    }
}
