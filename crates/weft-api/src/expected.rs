//! A condition on a stream as the wire carries it, shared by the append
//! bodies ([`crate::body`]) and the conflict details of errors
//! ([`crate::fault`]).

use serde::{Deserialize, Serialize};

/// A condition on an entry's stream on the wire: a number for an exact
/// next version (what older clients send), a string for a state. A server
/// that predates the states refuses the string as a bad body rather than
/// appending without the condition.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ExpectedWire {
    /// The stream's next version is exactly this.
    Version(u64),
    /// The stream is in this state.
    State(StreamState),
}

/// The stream states a condition can name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StreamState {
    /// No condition.
    Any,
    /// The stream never had an entry.
    NoStream,
    /// The stream has had an entry.
    StreamExists,
}

impl From<weft::Expected> for ExpectedWire {
    fn from(e: weft::Expected) -> Self {
        match e {
            weft::Expected::Exact(v) => ExpectedWire::Version(v),
            weft::Expected::Any => ExpectedWire::State(StreamState::Any),
            weft::Expected::NoStream => ExpectedWire::State(StreamState::NoStream),
            weft::Expected::StreamExists => ExpectedWire::State(StreamState::StreamExists),
        }
    }
}

impl From<ExpectedWire> for weft::Expected {
    fn from(e: ExpectedWire) -> Self {
        match e {
            ExpectedWire::Version(v) => weft::Expected::Exact(v),
            ExpectedWire::State(StreamState::Any) => weft::Expected::Any,
            ExpectedWire::State(StreamState::NoStream) => weft::Expected::NoStream,
            ExpectedWire::State(StreamState::StreamExists) => weft::Expected::StreamExists,
        }
    }
}

impl From<u64> for ExpectedWire {
    fn from(v: u64) -> Self {
        ExpectedWire::Version(v)
    }
}
