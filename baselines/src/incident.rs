//! The incident view shared by the baselines.
//!
//! Design constraints:
//! - Messages are the recorded commands in record order; a message's index is its id.
//! - `adverse_without(absent)` deletes messages at the consumption level (a deleted
//!   message's dependants lose it as input) and re-runs the pinned world; it never
//!   inserts anything, so omissions are invisible to message-deletion methods.
//! - Profiles are `BTreeMap`s over every non-sensor principal.

use std::collections::{BTreeMap, BTreeSet};

use audita_facility::scenario::Scenario;
use audita_facility::world::{Action, CommandId, Destination, Intervention, Mode};

/// A graded responsibility profile, principal name → grade.
pub type Profile = BTreeMap<String, f64>;

/// One recorded message as the baselines see it.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    /// Author.
    pub author: String,
    /// Destination (principal name or `actuator`).
    pub destination: String,
    /// Issue time in seconds.
    pub time_s: f64,
    /// Command name.
    pub command: &'static str,
    /// Rendered arguments.
    pub args: String,
    /// Indices of cited messages.
    pub cites: Vec<usize>,
    /// Numeric features for the anomaly detector: `[tick, speed or parameter, citation
    /// count, derived flag]`.
    pub features: [f64; 4],
}

/// An incident: messages, principals and a counterfactual outcome oracle.
pub trait Incident {
    /// Principals that can be named (non-sensor).
    fn principals(&self) -> Vec<String>;
    /// Recorded messages.
    fn messages(&self) -> &[Message];
    /// Whether the adverse outcome occurs with the messages in `absent` deleted.
    fn adverse_without(&self, absent: &BTreeSet<usize>) -> bool;
    /// A human-readable transcript (for judges).
    fn transcript(&self) -> String {
        let mut out = String::new();
        for (i, m) in self.messages().iter().enumerate() {
            let cites: Vec<String> = m.cites.iter().map(|c| format!("m{c}")).collect();
            out.push_str(&format!(
                "m{i} t={:.1}s {} -> {}: {}({}) cites [{}]\n",
                m.time_s,
                m.author,
                m.destination,
                m.command,
                m.args,
                cites.join(", ")
            ));
        }
        out
    }
    /// A zero profile over the principals.
    fn zero_profile(&self) -> Profile {
        self.principals().into_iter().map(|p| (p, 0.0)).collect()
    }
}

/// A facility scenario seen as an incident.
#[derive(Debug, Clone)]
pub struct FacilityIncident<'a> {
    scenario: &'a Scenario,
    messages: Vec<Message>,
    /// Command index of each message (reference counterparts are not messages).
    ids: Vec<CommandId>,
    /// Reference counterparts, kept inactive in every deletion counterfactual.
    references: BTreeSet<CommandId>,
}

impl<'a> FacilityIncident<'a> {
    /// Wraps a scenario.
    pub fn new(scenario: &'a Scenario) -> Self {
        let spec = &scenario.spec;
        let ids: Vec<CommandId> = (0..spec.commands.len())
            .filter(|i| !spec.commands[*i].is_reference())
            .map(|i| CommandId(i as u32))
            .collect();
        let references: BTreeSet<CommandId> = (0..spec.commands.len())
            .filter(|i| spec.commands[*i].is_reference())
            .map(|i| CommandId(i as u32))
            .collect();
        let pos = |c: &CommandId| ids.iter().position(|x| x == c);
        let messages = ids
            .iter()
            .map(|id| &spec.commands[id.0 as usize])
            .map(|c| {
                let (args, magnitude) = match c.action {
                    Action::MoveTo { robot, to } => (
                        format!("robot={}, x={}mm, y={}mm", robot.0, to.x, to.y),
                        0.0,
                    ),
                    Action::SetSpeed { robot, speed } => (
                        format!("robot={}, speed={:.2}m/s", robot.0, speed as f64 / 100.0),
                        speed as f64,
                    ),
                    Action::Halt { robot } => (format!("robot={}", robot.0), 0.0),
                    Action::SetParam { batch, value } => (
                        format!("batch={}, value={:.3}", batch.0, value as f64 / 1000.0),
                        value as f64 / 50.0,
                    ),
                };
                let destination = match c.destination {
                    Destination::Principal(p) => spec.name(p).to_string(),
                    Destination::Actuator => "actuator".to_string(),
                };
                let derived = if c.derivation == audita_facility::world::Derivation::Origin {
                    0.0
                } else {
                    1.0
                };
                Message {
                    author: spec.name(c.author).to_string(),
                    destination,
                    time_s: c.tick as f64 / 10.0,
                    command: c.action.name(),
                    args,
                    cites: c.cites.iter().filter_map(pos).collect(),
                    features: [c.tick as f64, magnitude, c.cites.len() as f64, derived],
                }
            })
            .collect();
        Self {
            scenario,
            messages,
            ids,
            references,
        }
    }
}

impl Incident for FacilityIncident<'_> {
    fn principals(&self) -> Vec<String> {
        self.scenario.principals()
    }
    fn messages(&self) -> &[Message] {
        &self.messages
    }
    fn adverse_without(&self, absent: &BTreeSet<usize>) -> bool {
        let mut gone: BTreeSet<CommandId> = absent
            .iter()
            .filter_map(|&i| self.ids.get(i).copied())
            .collect();
        gone.extend(self.references.iter().copied());
        let iv = Intervention {
            absent: gone,
            fulfilled: BTreeSet::new(),
        };
        self.scenario.spec.run(&iv, Mode::Pinned).adverse.is_some()
    }
}
