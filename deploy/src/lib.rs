//! A deployment of Audita: files the operator owns — `audita.toml` ([`config`]), the
//! public principal registry (`audita_evidence::registry`), the duty registry and the
//! private key files ([`keys`], which live in `audita_keys`) — validated once at
//! start-up into a [`Config`] every stage passes around, and the operations that
//! create and change them ([`init`]).
//!
//! Guarantees:
//! - Every private key is generated from OS randomness and written to its own file
//!   (mode 0600) or read from one (refused if group/world accessible) or from the
//!   environment; nothing secret is derived from a public value.
//! - Every file it replaces is replaced atomically and durably
//!   (`audita_files::write_atomic`).
//! - A bad value is a one-line error naming the file, the field and the reason.
#![warn(missing_docs)]
#![warn(clippy::too_many_lines)]

pub mod config;
pub mod init;
pub mod notifier;

/// Private key files, at their old path: they live in `audita_keys`, below the
/// engine, so light clients read their keys without linking this crate.
pub use audita_keys as keys;
pub use config::{Clock, Config, ConfigError, Keeper, CONFIG_FORMAT};
pub use init::{
    add_principal, add_principals, init, init_with, now_ms, register_public, revoke_principal,
    rotate_principal, set_duties, set_predicates, set_record_time_relative, DeployError,
    InitOptions, NewKey,
};
pub use keys::KeyError;
pub use notifier::Notifier;
