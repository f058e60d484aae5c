//! One module per subcommand: its clap arguments and its `run`.

pub(crate) mod admin;
pub(crate) mod append;
pub(crate) mod demo;
pub(crate) mod inspect;
pub(crate) mod read;
pub(crate) mod retention;
pub(crate) mod serve;
pub(crate) mod stream;
pub(crate) mod tail;
pub(crate) mod trim;
pub(crate) mod verify;
pub(crate) mod wal;
