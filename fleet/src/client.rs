//! The simulated fleet as a client of a deployment: it enrols its principals through
//! the same code as `audita principal add` (fresh keys, one private key file each),
//! installs its duty registry, and later signs with exactly those key files.
//!
//! Design constraints:
//! - Enrolment is idempotent: principals already registered keep their keys.
//! - The fleet never signs with a key the deployment did not register: a principal
//!   without a key file is an error naming how many are missing and one of them.
//! - A throw-away demo deployment ([`demo_deployment`]) has fresh keys and a per-run
//!   origin, so no two runs sign different trees under one log identity; with an
//!   insecure seed its keys derive from that public seed and the origin names it.

use crate::fleet::{self, Fleet};
use audita_deploy::{Config, DeployError, InitOptions};
use audita_evidence::SigningKey;
use std::collections::BTreeMap;
use std::path::Path;

/// Keepers a demo deployment runs in its own process.
pub const DEMO_KEEPERS: [&str; 2] = ["operator.example/keeper", "insurer.example/keeper"];

/// The log origin of a seed-derived (insecure, reproducible) deployment: it names the
/// seed, so two runs of different seeds never sign under one identity.
pub fn seeded_origin(seed: u64) -> String {
    format!("audita.demo/seed-{seed}")
}

/// The simulated fleet's shape: how many cells, from which scenario seed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Facility cells.
    pub cells: usize,
    /// Scenario seed (the fleet's content, not its keys).
    pub seed: u64,
}

impl Shape {
    fn check(&self) -> Result<(), DeployError> {
        if self.cells == 0 {
            return Err(DeployError::Other("--cells must be at least 1".into()));
        }
        Ok(())
    }
}

/// Registers the simulated fleet in the deployment at `config`: every principal it
/// signs as gets a fresh key through `principal add`'s code, and the deployment's
/// duty registry and adverse predicates become the fleet's. Returns the number of principals.
pub fn register(config: &Path, shape: &Shape) -> Result<usize, DeployError> {
    shape.check()?;
    // Names and roles first (the content does not depend on the keys).
    let names = fleet::build(&fleet::DEMO_MIX, shape.cells, shape.seed);
    let c = Config::load(config)?;
    let fresh: Vec<(&str, &str)> = names
        .roles
        .iter()
        .filter(|(n, _)| c.principals.get(n).is_none())
        .map(|(n, r)| (n.as_str(), r.as_str()))
        .collect();
    audita_deploy::add_principals(config, &fresh, None)?;
    audita_deploy::set_duties(config, &names.duties_json)?;
    audita_deploy::set_predicates(config, &names.predicates_json)?;
    // The simulated world's clock starts at 0.
    audita_deploy::set_record_time_relative(config, None)?;
    Ok(names.roles.len())
}

/// The simulated fleet signed with the key files the deployment registered for it.
pub fn fleet_of(c: &Config, shape: &Shape) -> Result<Fleet, DeployError> {
    shape.check()?;
    let mut missing: Vec<String> = Vec::new();
    let mut keys: BTreeMap<String, SigningKey> = BTreeMap::new();
    let dir = c.dir.join("keys/principals");
    let mut source = |name: &str| -> SigningKey {
        if let Some(k) = keys.get(name) {
            return k.clone();
        }
        // Relative to the deployment's directory, whether that is absolute or not
        // (`audita demo --out audita-demo`).
        match audita_deploy::keys::load(&format!("keys/principals/{name}.key"), &c.dir, Some(name))
        {
            Ok(k) => {
                keys.insert(name.to_string(), k.clone());
                k
            }
            Err(_) => {
                missing.push(name.to_string());
                audita_deploy::keys::generate()
            }
        }
    };
    let f = fleet::build_with(&fleet::DEMO_MIX, shape.cells, shape.seed, &mut source);
    if let Some(first) = missing.first() {
        return Err(DeployError::Other(format!(
            "{} fleet principals have no key file in {} (e.g. {first}): run `audita fleet register` with the same --cells and --seed first",
            missing.len(),
            dir.display()
        )));
    }
    Ok(f)
}

/// A fresh run identifier for a throw-away deployment's origin (OS randomness).
pub fn run_id() -> String {
    audita_deploy::keys::run_id()
}

/// Creates the throw-away deployment of `audita demo` in `dir` and registers the
/// simulated fleet in it: fresh keys and a per-run origin — or, with `insecure_seed`,
/// keys derived from that public seed and the origin naming it (reproducible tests).
/// Its keepers are the services `keepers` lists (name, vkey, URL), or, when none is
/// given, [`DEMO_KEEPERS`] run in the sealer's process.
pub fn demo_deployment(
    dir: &Path,
    shape: &Shape,
    insecure_seed: Option<u64>,
    keepers: &[(String, String, String)],
) -> Result<Config, DeployError> {
    let origin = match insecure_seed {
        Some(seed) => seeded_origin(seed),
        None => format!("audita.demo/run-{}", run_id()),
    };
    let opts = InitOptions {
        local_keepers: if keepers.is_empty() {
            DEMO_KEEPERS.iter().map(|k| k.to_string()).collect()
        } else {
            Vec::new()
        },
        insecure_demo_seed: insecure_seed,
        remote_keepers: keepers.to_vec(),
    };
    let made = audita_deploy::init_with(dir, &origin, &opts)?;
    register(&made.config, shape)?;
    Ok(Config::load(&made.config)?)
}
