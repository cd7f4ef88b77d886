//! The facility register (SPEC §5): a deterministic kinematic world at 0.1 s ticks,
//! principals issuing typed commands, the scenario library with planted ground truth,
//! and the analytic oracle computing ground truth by exact re-execution.
//!
//! **Architecture invariant.** A pure library: no I/O, no wall clock; every random
//! choice comes from a seeded ChaCha stream, so one seed gives one world, one record
//! (byte for byte) and one truth. The oracle ([`oracle`], [`conduct`],
//! [`generator::analytic_truth`]) shares no code with `audita-causal`; only the
//! engine-facing adapters ([`model`], [`replay`]) depend on it.
//!
//! **API boundary.**
//! - [`world`]: `WorldSpec` (initial state + fixed command record + duty registry),
//!   `WorldSpec::run(&Intervention, Mode)` → `Run` (effective commands, actuation
//!   events, sensor reports, adverse outcome). `Mode::Pinned` or `Mode::Hosted`.
//! - [`scenario`]: `generate(Family, seed)` → `Scenario` with `Planted` truth;
//!   [`generator::generate`] for the series-parallel generator.
//! - [`oracle`]: `truth(&WorldSpec)` → `Truth` (candidates, minimal causes, causal and
//!   culpable profiles, conduit and breach sets); [`conduct::certificate`] for the
//!   blame-shift certificate.
//! - [`model`]: the SPEC §7 structural model of an incident for the engine;
//!   [`replay::WorldReplayer`]: the engine's `Replayer` on the world.
//! - [`record`]: `sign_record(&Scenario)` → signed, sealed `audita-evidence` record;
//!   `attack(..)` for forge / drop / reorder / equivocate; `sign_record_off_bus` for a
//!   record whose chosen links travelled off the bus.
//! - [`perimeter`]: off-bus links drawn at a fraction, and what a verdict sees of the
//!   true profile (invisible responsibility, over-attribution).
//! - [`repair`]: one-edit repairs (duty-compliant counterpart, inserted halt), the
//!   edit space of the random arm, the verdict-guided edit, harm after an edit.
#![warn(missing_docs)]
#![warn(clippy::too_many_lines)]

mod blueprint;
pub mod conduct;
pub mod generator;
pub mod model;
pub mod oracle;
pub mod perimeter;
pub mod record;
pub mod repair;
pub mod replay;
pub mod scenario;
pub mod world;
