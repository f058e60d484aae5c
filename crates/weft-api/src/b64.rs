//! Payloads as base64 text in JSON (standard alphabet, padded).

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use serde::{Deserialize, Deserializer, Serializer};

/// Encodes `bytes` as base64 text.
pub fn encode(bytes: &[u8]) -> String {
    STANDARD.encode(bytes)
}

/// Decodes base64 text.
///
/// Errors: `InvalidInput` when `text` is not standard padded base64.
pub fn decode(text: &str) -> weft::Result<Bytes> {
    STANDARD
        .decode(text)
        .map(Bytes::from)
        .map_err(|e| weft::Error::invalid_input(format!("data is not base64: {e}")))
}

/// `#[serde(with = "weft_api::b64")]` for a `Bytes` field.
pub fn serialize<S: Serializer>(bytes: &Bytes, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&encode(bytes))
}

/// `#[serde(with = "weft_api::b64")]` for a `Bytes` field.
pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Bytes, D::Error> {
    let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
    decode(&text).map_err(serde::de::Error::custom)
}

/// `#[serde(with = "weft_api::b64::option")]` for an `Option<Bytes>` field.
pub mod option {
    use super::*;

    /// Serializes `None` as `null`.
    pub fn serialize<S: Serializer>(bytes: &Option<Bytes>, s: S) -> Result<S::Ok, S::Error> {
        match bytes {
            Some(b) => s.serialize_some(&encode(b)),
            None => s.serialize_none(),
        }
    }

    /// Reads `null` (or a missing field, with `#[serde(default)]`) as `None`.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Bytes>, D::Error> {
        match <Option<std::borrow::Cow<'de, str>>>::deserialize(d)? {
            Some(text) => decode(&text).map(Some).map_err(serde::de::Error::custom),
            None => Ok(None),
        }
    }
}
