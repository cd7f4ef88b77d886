//! Audita's verdict on a facility scenario's signed record, hosted on the scenario's
//! own world (replay certification on the pinned world), and the verdict's findings as
//! the plain data the repair comparison edits: what the attribution and perimeter
//! benchmarks, and the facility's perimeter tests, share.

use audita_evidence::verify_record;
use audita_facility::record::{adverse_json, registry_json, verdict_variables, SignedRecord};
use audita_facility::repair::Culprit;
use audita_facility::replay::WorldReplayer;
use audita_facility::scenario::Scenario;
use audita_verdict::{verdict_with, Adverse, DutyRegistry, Options, Standard, Verdict};

/// Audita's verdict on `record` (the signed record of a scenario, or an altered copy
/// of it): verify, and run `audita-verdict` under `standard` with replay
/// certification on the pinned world. `None` when the run is not adverse.
pub fn hosted_verdict(
    sc: &Scenario,
    record: &audita_evidence::Record,
    sr: &SignedRecord,
    standard: &str,
) -> anyhow::Result<Option<Verdict>> {
    let part = verify_record(record, &sr.keys);
    let Some(adv) = adverse_json(sc, sr)? else {
        return Ok(None);
    };
    let reg = DutyRegistry::from_json(&registry_json(sc, standard))?;
    let adv = Adverse::from_json(&adv)?;
    let mut rep = WorldReplayer::named(&sc.spec, None, verdict_variables(sc, sr));
    Ok(Some(verdict_with(
        record,
        &part,
        &reg,
        &adv,
        &Options::default(),
        Some(&mut rep),
    )?))
}

/// The verdict's findings as plain data: the culpable ones with their
/// reasonable-agent violations, or every involved one (ρ_lo > 0) with its
/// specification-standard violations.
pub fn findings(v: &Verdict, culpable: bool) -> Vec<Culprit> {
    let standard = if culpable {
        Standard::ReasonableAgent
    } else {
        Standard::Specification
    };
    v.principals
        .iter()
        .filter(|(_, f)| if culpable { f.culpable } else { f.rho_lo > 0.0 })
        .map(|(p, f)| Culprit {
            principal: p.clone(),
            rho_lo: f.rho_lo,
            violations: f
                .breach
                .violations
                .iter()
                .filter(|x| x.standards.contains(&standard))
                .map(|x| (x.duty.clone(), x.evidence.clone()))
                .collect(),
        })
        .collect()
}
