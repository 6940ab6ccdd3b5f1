//! Transforms: where a player is, and how it moves. Fields a client adds that
//! the relay does not know are kept and relayed unchanged.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// How a player moves. Missing fields read as false / 0.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct MovementState {
    /// Moving at all.
    pub moving: bool,
    /// Sprinting.
    pub sprinting: bool,
    /// Sneaking.
    pub sneaking: bool,
    /// In the air.
    pub jumping: bool,
    /// Weapon out.
    pub weapon_drawn: bool,
    /// Speed, in the game's units per second.
    pub speed: f32,
}

/// A player's transform.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Transform {
    /// Position.
    pub position: [f32; 3],
    /// Rotation (Euler angles, degrees).
    pub rotation: [f32; 3],
    /// The zone (cell, map area): the interest filter.
    pub zone: String,
    /// Movement, if the client sends it.
    pub state: Option<MovementState>,
    /// Fields the relay does not know, as JSON text, kept and relayed as sent.
    pub extra: BTreeMap<String, String>,
}

/// The longest zone name.
pub const MAX_ZONE: usize = 64;
/// The most unknown fields kept.
pub const MAX_EXTRA: usize = 32;
/// The longest unknown field, as JSON text.
pub const MAX_EXTRA_LEN: usize = 1024;

const KNOWN: [&str; 7] = ["type", "x", "y", "z", "rotation", "zone", "state"];

/// Why a transform was refused: what a client is told.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TransformError {
    /// The zone's name is longer than [`MAX_ZONE`] bytes.
    #[error("zone names have at most {MAX_ZONE} bytes")]
    ZoneTooLong,
    /// More than [`MAX_EXTRA`] unknown fields, or one longer than
    /// [`MAX_EXTRA_LEN`].
    #[error("at most {MAX_EXTRA} extra fields of {MAX_EXTRA_LEN} bytes")]
    TooMuchExtra,
    /// A position or rotation is not a finite number.
    #[error("positions and rotations must be finite numbers")]
    NotFinite,
    /// A JSON field that must be a number is not (`x`, `y`, `z`).
    #[error("{0} must be a number")]
    NotANumber(&'static str),
    /// `rotation` is neither `[x, y, z]` nor a number.
    #[error("rotation must be [x, y, z] or a number")]
    Rotation,
    /// `state` does not read as a [`MovementState`].
    #[error("state: {0}")]
    State(String),
}

impl Transform {
    /// Checks the limits.
    pub fn check(&self) -> Result<(), TransformError> {
        if self.zone.len() > MAX_ZONE {
            return Err(TransformError::ZoneTooLong);
        }
        if self.extra.len() > MAX_EXTRA || self.extra.values().any(|v| v.len() > MAX_EXTRA_LEN) {
            return Err(TransformError::TooMuchExtra);
        }
        if self
            .position
            .iter()
            .chain(&self.rotation)
            .any(|v| !v.is_finite())
        {
            return Err(TransformError::NotFinite);
        }
        Ok(())
    }

    /// From a JSON client's object: `{"type":"transform","x":..,"y":..,"z":..,
    /// "rotation":[..],"zone":"..","state":{..}, ...anything else}`.
    pub fn from_json(object: &Map<String, Value>) -> Result<Transform, TransformError> {
        let num = |key: &'static str| {
            object.get(key).map_or(Ok(0.0), |v| {
                v.as_f64()
                    .map(|f| f as f32)
                    .ok_or(TransformError::NotANumber(key))
            })
        };
        let rotation = match object.get("rotation") {
            None => [0.0; 3],
            Some(Value::Array(values)) if values.len() == 3 => {
                let mut r = [0.0; 3];
                for (slot, v) in r.iter_mut().zip(values) {
                    *slot = v.as_f64().ok_or(TransformError::Rotation)? as f32;
                }
                r
            }
            Some(Value::Number(yaw)) => [0.0, yaw.as_f64().unwrap_or(0.0) as f32, 0.0],
            Some(_) => return Err(TransformError::Rotation),
        };
        let zone = match object.get("zone") {
            None => String::new(),
            Some(Value::String(zone)) => zone.clone(),
            Some(other) => other.to_string(),
        };
        let state = match object.get("state") {
            None | Some(Value::Null) => None,
            Some(value) => {
                let state = serde_json::from_value(value.clone());
                Some(state.map_err(|e| TransformError::State(e.to_string()))?)
            }
        };
        let extra = object
            .iter()
            .filter(|(k, _)| {
                !KNOWN.contains(&k.as_str())
                    && k.as_str() != "playerId"
                    && k.as_str() != "serverTime"
            })
            .map(|(k, v)| (k.clone(), v.to_string()))
            .collect();
        let transform = Transform {
            position: [num("x")?, num("y")?, num("z")?],
            rotation,
            zone,
            state,
            extra,
        };
        transform.check()?;
        Ok(transform)
    }

    /// As a JSON object for JSON clients, stamped with the sender and the
    /// server time.
    pub fn to_json(&self, player_id: u32, server_time_ms: u64) -> Value {
        let mut object = Map::new();
        // Unknown fields first, so that known ones always win.
        for (key, text) in &self.extra {
            if let Ok(value) = serde_json::from_str::<Value>(text) {
                object.insert(key.clone(), value);
            }
        }
        object.insert("type".into(), "transform".into());
        object.insert("playerId".into(), player_id.into());
        object.insert("serverTime".into(), server_time_ms.into());
        object.insert("x".into(), f64::from(self.position[0]).into());
        object.insert("y".into(), f64::from(self.position[1]).into());
        object.insert("z".into(), f64::from(self.position[2]).into());
        object.insert(
            "rotation".into(),
            self.rotation
                .iter()
                .map(|v| Value::from(f64::from(*v)))
                .collect(),
        );
        object.insert("zone".into(), self.zone.clone().into());
        if let Some(state) = &self.state {
            object.insert(
                "state".into(),
                serde_json::to_value(state).unwrap_or(Value::Null),
            );
        }
        Value::Object(object)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_json_fields_survive_the_round_trip() {
        let input: Value = serde_json::from_str(
            r#"{"type":"transform","x":1.5,"y":2,"z":-3,"rotation":[0,90,0],"zone":"town",
                "state":{"moving":true,"sprinting":false,"sneaking":false,"jumping":false,"weapon_drawn":true,"speed":4.5},
                "emote":"wave","gear":{"hat":3}}"#,
        )
        .unwrap();
        let transform = Transform::from_json(input.as_object().unwrap()).unwrap();
        assert_eq!(transform.zone, "town");
        assert_eq!(transform.extra.len(), 2);
        let out = transform.to_json(7, 1234);
        assert_eq!(out["playerId"], 7);
        assert_eq!(out["serverTime"], 1234);
        assert_eq!(out["emote"], "wave");
        assert_eq!(out["gear"]["hat"], 3);
        assert_eq!(out["state"]["weapon_drawn"], true);
        assert_eq!(out["x"], 1.5);
    }

    #[test]
    fn bad_fields_are_refused() {
        for bad in [
            r#"{"x":"far"}"#,
            r#"{"rotation":[1,2]}"#,
            r#"{"state":{"moving":"yes"}}"#,
        ] {
            let value: Value = serde_json::from_str(bad).unwrap();
            assert!(
                Transform::from_json(value.as_object().unwrap()).is_err(),
                "{bad}"
            );
        }
        let refused = |text: &str| {
            let value: Value = serde_json::from_str(text).unwrap();
            Transform::from_json(value.as_object().unwrap()).unwrap_err()
        };
        assert_eq!(refused(r#"{"y":"up"}"#), TransformError::NotANumber("y"));
        assert_eq!(refused(r#"{"rotation":"left"}"#), TransformError::Rotation);
        let long = format!(r#"{{"zone":"{}"}}"#, "z".repeat(MAX_ZONE + 1));
        assert_eq!(refused(&long), TransformError::ZoneTooLong);
        assert_eq!(
            refused(r#"{"x":1e39}"#),
            TransformError::NotFinite,
            "past f32's range"
        );
    }
}
