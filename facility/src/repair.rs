//! Repair: one edit to the recorded conduct, and the world re-run after it.
//!
//! The verdict names who breached which duty through which message; the repair it
//! implies replaces that message by its duty-compliant counterpart, or inserts the
//! halt whose omission it graded. This module applies such edits to a world and
//! measures the harm that remains, so a verdict-guided repair can be compared with a
//! budget-matched random one (paper: "repair guided by the verdict").
//!
//! Design constraints:
//! - An [`Edit`] is one of two operators, the same for every arm:
//!   * `Replace(c)` — command `c` is replaced by its **duty-compliant counterpart**
//!     ([`compliant`]): a speed **clamped** to the robot's registered envelope, a batch
//!     parameter clamped into its acceptance range; moves and halts are their own
//!     counterparts. Content flows through faithful relays: a relay that forwarded the
//!     command's original content forwards the compliant content instead, unless
//!     another input it consumes still carries the original (a relay passes a demand
//!     if any consumed input makes it). Timing, addressing and citations are kept.
//!   * `InsertHalt(d)` — the dutiful halt of halt duty `d`, as the registered
//!     supervisor policy derives it from the recorded sensor report (the world's
//!     omission variable set to fulfilled).
//! - The edit space of an incident ([`edits`]): `InsertHalt(d)` for each triggered
//!   halt duty whose halt was not issued, and `Replace(c)` for every recorded command
//!   ([`Space::AnyMessage`], an uninformed repairer, whose edit of a compliant command
//!   is wasted) or only for those whose counterpart differs ([`Space::Changing`], a
//!   repairer who already knows which messages breach an envelope). A budget-matched
//!   random repair is one edit drawn uniformly from a space; its expected harm is
//!   computed exactly by applying every edit of the space.
//! - Harm is read from the pinned re-run ([`harm`]): whether the outcome is adverse and
//!   its severity ½·m·v² (millijoules; 0 for a quality outcome).
//! - The verdict-guided edit ([`guided`]) reads only the verdict's culpable findings
//!   (plain data, [`Culprit`]) and the record's message ids: the finding with the
//!   highest ρ_lo (ties by name) gives its first violation that maps to an edit — a
//!   halt duty's absence gives `InsertHalt`, an envelope violation gives `Replace` of
//!   the witnessing message of that principal. [`guided_by_grade`] also reads the
//!   grades: only a but-for cause (ρ_lo = 1) can be averted by one edit.

use std::collections::BTreeSet;

use crate::record::SignedRecord;
use crate::world::{
    Action, Adverse, CommandId, Derivation, Duty, DutyId, Intervention, Mode, WorldSpec,
};

/// One edit to the recorded conduct.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Edit {
    /// Replace a command by its duty-compliant counterpart.
    Replace(CommandId),
    /// Insert the dutiful halt of a halt duty.
    InsertHalt(DutyId),
}

/// Harm of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Harm {
    /// Whether the outcome is adverse.
    pub adverse: bool,
    /// ½·m·v² in millijoules (0 when not adverse or a quality outcome).
    pub severity_mj: u64,
}

impl Harm {
    fn of(a: Option<Adverse>) -> Harm {
        match a {
            None => Harm::default(),
            Some(Adverse::Safety { severity_mj, .. }) => Harm {
                adverse: true,
                severity_mj,
            },
            Some(Adverse::Quality { .. }) => Harm {
                adverse: true,
                severity_mj: 0,
            },
        }
    }
}

/// The duty-compliant counterpart of an action under the world's registry.
pub fn compliant(spec: &WorldSpec, action: Action) -> Action {
    match action {
        Action::SetSpeed { robot, speed } => Action::SetSpeed {
            robot,
            speed: speed.min(crate::oracle::envelope(spec, robot.0 as usize)),
        },
        Action::SetParam { batch, value } => match spec.batches.get(batch.0 as usize) {
            Some(b) => Action::SetParam {
                batch,
                value: value.clamp(b.range.0, b.range.1),
            },
            None => action,
        },
        Action::MoveTo { .. } | Action::Halt { .. } => action,
    }
}

/// The world after `edit` (and the intervention that carries an inserted halt).
pub fn apply(spec: &WorldSpec, edit: Edit) -> (WorldSpec, Intervention) {
    let mut out = spec.clone();
    let mut iv = Intervention::default();
    match edit {
        Edit::InsertHalt(d) => {
            iv.fulfilled.insert(d);
        }
        Edit::Replace(c) => {
            let Some(cmd) = spec.commands.get(c.0 as usize) else {
                return (out, iv);
            };
            out.commands[c.0 as usize].action = compliant(spec, cmd.action);
            // Content flows downstream through faithful relays (issue order: a relay
            // follows its inputs).
            for i in (c.0 as usize + 1)..spec.commands.len() {
                let orig = &spec.commands[i];
                if orig.derivation == Derivation::Origin || orig.is_reference() {
                    continue;
                }
                let carriers: Vec<usize> = orig
                    .cites
                    .iter()
                    .map(|x| x.0 as usize)
                    .filter(|&x| {
                        spec.commands
                            .get(x)
                            .is_some_and(|p| p.action == orig.action)
                    })
                    .collect();
                if carriers.is_empty() {
                    continue; // a transformation, not a faithful relay
                }
                if carriers
                    .iter()
                    .all(|&x| out.commands[x].action != orig.action)
                {
                    out.commands[i].action = out.commands[carriers[0]].action;
                }
            }
        }
    }
    (out, iv)
}

/// Harm of the recorded world after `edit` (pinned re-run).
pub fn harm_after(spec: &WorldSpec, edit: Option<Edit>) -> Harm {
    match edit {
        None => harm(spec, &Intervention::default()),
        Some(e) => {
            let (w, iv) = apply(spec, e);
            harm(&w, &iv)
        }
    }
}

/// Harm of a world under an intervention (pinned re-run).
pub fn harm(spec: &WorldSpec, iv: &Intervention) -> Harm {
    Harm::of(spec.run(iv, Mode::Pinned).adverse)
}

/// The edit space a random repairer draws from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Space {
    /// Every recorded command (its counterpart may be itself: a wasted edit) and every
    /// omitted triggered halt — a repairer who knows nothing of the incident.
    AnyMessage,
    /// Only edits that change conduct: commands whose counterpart differs, omitted
    /// triggered halts — a repairer who already knows which messages breach an envelope.
    Changing,
}

/// The edits of `space` on a world, in a fixed order.
pub fn edits(spec: &WorldSpec, space: Space) -> Vec<Edit> {
    let mut out: Vec<Edit> = spec
        .commands
        .iter()
        .enumerate()
        .filter(|(_, c)| {
            !c.is_reference()
                && (space == Space::AnyMessage || compliant(spec, c.action) != c.action)
        })
        .map(|(i, _)| Edit::Replace(CommandId(i as u32)))
        .collect();
    let reports = spec.sensor_reports();
    out.extend(
        spec.unfulfilled_duties()
            .into_iter()
            .filter(|d| {
                matches!(
                    spec.duties.get(d.0 as usize),
                    Some(Duty::HaltOnEntry { .. })
                ) && spec.dutiful_halt(*d, &reports).is_some()
            })
            .map(Edit::InsertHalt),
    );
    out
}

/// A culpable finding of a verdict, as plain data.
#[derive(Debug, Clone, PartialEq)]
pub struct Culprit {
    /// Principal.
    pub principal: String,
    /// Its involvement bound ρ_lo.
    pub rho_lo: f64,
    /// Its violations: (duty id, witnessing message ids `author:hex`).
    pub violations: Vec<(String, Vec<String>)>,
}

/// The one-edit repair a verdict implies (`None` when it names no culprit, or no
/// violation maps to an edit).
pub fn guided(spec: &WorldSpec, sr: &SignedRecord, culprits: &[Culprit]) -> Option<Edit> {
    let mut order: Vec<&Culprit> = culprits.iter().collect();
    order.sort_by(|a, b| {
        b.rho_lo
            .total_cmp(&a.rho_lo)
            .then(a.principal.cmp(&b.principal))
    });
    let unfulfilled: BTreeSet<DutyId> = spec.unfulfilled_duties().into_iter().collect();
    for c in order {
        for (duty, evidence) in &c.violations {
            if let Some(d) = duty
                .strip_prefix("halt-")
                .and_then(|i| i.parse::<u16>().ok())
                .map(DutyId)
            {
                if unfulfilled.contains(&d) {
                    return Some(Edit::InsertHalt(d));
                }
                continue;
            }
            for ev in evidence {
                let hit =
                    sr.command_map.iter().enumerate().find_map(|(i, id)| {
                        id.as_ref().filter(|id| id.to_string() == *ev).map(|_| i)
                    });
                let Some(i) = hit else { continue };
                let cmd = &spec.commands[i];
                if spec.name(cmd.author) == c.principal && compliant(spec, cmd.action) != cmd.action
                {
                    return Some(Edit::Replace(CommandId(i as u32)));
                }
            }
        }
    }
    None
}

/// The one-edit repair a verdict implies when its grades are read as well: one edit
/// can avert the outcome only through a but-for cause (a minimal cause of size one,
/// ρ_lo = 1). So: [`guided`] over the culprits with ρ_lo = 1; when every culprit is
/// overdetermined (ρ_lo < 1: its fix alone cannot avert), [`guided`] over the
/// `involved` findings with ρ_lo = 1 — their violations under the literal
/// specification standard, e.g. a faithful relay forwarding a demand outside the
/// envelope it holds — and only then the plain [`guided`] edit.
pub fn guided_by_grade(
    spec: &WorldSpec,
    sr: &SignedRecord,
    culprits: &[Culprit],
    involved: &[Culprit],
) -> Option<Edit> {
    let but_for = |cs: &[Culprit]| -> Vec<Culprit> {
        cs.iter().filter(|c| c.rho_lo >= 1.0).cloned().collect()
    };
    guided(spec, sr, &but_for(culprits))
        .or_else(|| guided(spec, sr, &but_for(involved)))
        .or_else(|| guided(spec, sr, culprits))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{generate, Family};

    #[test]
    fn clamping_a_redundant_proposal_leaves_the_relayed_hazard() {
        let sc = generate(Family::Redundancy, 1);
        let before = harm_after(&sc.spec, None);
        assert!(before.adverse);
        // planner-1's proposal is command 0: its twin still carries the hazard.
        assert!(harm_after(&sc.spec, Some(Edit::Replace(CommandId(0)))).adverse);
        // The dispatcher's relay (command 2) carries it alone.
        let (w, _) = apply(&sc.spec, Edit::Replace(CommandId(2)));
        assert_eq!(w.commands[3].action, w.commands[2].action);
        assert!(!harm_after(&sc.spec, Some(Edit::Replace(CommandId(2)))).adverse);
    }

    #[test]
    fn the_edit_space_holds_the_hazards_and_the_omitted_halt() {
        let sc = generate(Family::Omission, 0);
        assert_eq!(
            edits(&sc.spec, Space::Changing),
            vec![Edit::InsertHalt(DutyId(0))]
        );
        // The three compliant route commands are wasted edits of an uninformed repairer.
        assert_eq!(edits(&sc.spec, Space::AnyMessage).len(), 4);
        let sc = generate(Family::Chain, 0);
        // The user's compliant ask is not a changing edit; every hazardous link is.
        assert_eq!(
            edits(&sc.spec, Space::Changing).len(),
            sc.spec.commands.len() - 1
        );
    }
}
