//! The game's own messages, decoded: `app.receive::<Board>()` turns every
//! server message on `Board`'s channels into a [`Received<Board>`].

use bevy_app::{App, PreUpdate};
use bevy_ecs::prelude::*;

use switchboard::message::TypedMessage;

use crate::client::{SwitchboardEvent, SwitchboardSystems};

/// A message from the server, decoded into the game's type `M`.
#[derive(Message, Debug, Clone, PartialEq)]
pub struct Received<M: Send + Sync + 'static>(pub M);

/// Registers a message type of the game: `app.receive::<Board>()`.
pub trait ReceiveAppExt {
    /// Decodes every message on `M`'s channels into a [`Received<M>`],
    /// each frame in `PreUpdate` (`SwitchboardSystems::Apply`). A message
    /// that does not decode (another build of the game, a server bug) is
    /// logged with its channel, action and why, and still reaches the game
    /// as its [`SwitchboardEvent`].
    fn receive<M: TypedMessage + Send + Sync + 'static>(&mut self) -> &mut Self;
}

impl ReceiveAppExt for App {
    fn receive<M: TypedMessage + Send + Sync + 'static>(&mut self) -> &mut Self {
        self.add_message::<Received<M>>()
            .add_systems(PreUpdate, decode::<M>.in_set(SwitchboardSystems::Apply))
    }
}

fn decode<M: TypedMessage + Send + Sync + 'static>(
    mut events: MessageReader<SwitchboardEvent>,
    mut received: MessageWriter<Received<M>>,
) {
    for message in events.read().filter_map(SwitchboardEvent::message) {
        if !M::accepts_channel(message.channel_id()) {
            continue;
        }
        match M::decode(message) {
            Ok(value) => {
                received.write(Received(value));
            }
            Err(err) => tracing::warn!(
                channel = message.channel_id(),
                action = message.action_id(),
                %err,
                "a server message did not decode"
            ),
        }
    }
}
