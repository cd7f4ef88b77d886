//! `audita init`, `audita principal add|rotate|revoke` and `audita fleet register`:
//! creating and changing a deployment an operator owns (the files are documented in
//! `audita_deploy`). The simulated fleet is one client of a deployment
//! (`audita_fleet::client`): `fleet register` enrols its principals through the
//! same code as `principal add` (fresh keys, one file each) and installs its duty
//! registry; `audita feed` then signs with those key files.

use std::path::PathBuf;

use audita_deploy::InitOptions;
use audita_fleet::client;
use clap::{Args, Subcommand};

/// `audita init DIR --origin ORIGIN`.
#[derive(Args, Debug)]
pub struct InitArgs {
    /// The new deployment's directory.
    pub dir: PathBuf,
    /// The log's origin (checkpoint origin line, e.g. `site-7.example/audita`).
    #[arg(long)]
    pub origin: String,
    /// A keeper run in this deployment's process (name; repeatable). Keepers in
    /// other trust domains are listed in audita.toml by their published vkey.
    #[arg(long = "local-keeper", value_name = "NAME")]
    pub local_keepers: Vec<String>,
    /// A keeper run as a tlog-witness service in its own trust domain, by its
    /// published verifier key and endpoint (repeatable): `VKEY@URL`, e.g.
    /// `insurer.example/keeper+5e6f7a8b+BA…@https://keeper.insurer.example/`.
    #[arg(long = "keeper", value_name = "VKEY@URL")]
    pub keepers: Vec<String>,
    /// TESTS AND DEMOS ONLY: derive every key of the deployment from `--seed`, a
    /// public value (written into audita.toml as `[insecure] demo_seed`).
    #[arg(long, requires = "seed")]
    pub insecure_demo_keys: bool,
    /// The public seed of `--insecure-demo-keys`.
    #[arg(long)]
    pub seed: Option<u64>,
}

/// `audita principal …`.
#[derive(Args, Debug)]
pub struct PrincipalArgs {
    #[command(subcommand)]
    pub command: PrincipalCommand,
}

/// What to do with a principal.
#[derive(Subcommand, Debug)]
pub enum PrincipalCommand {
    /// Register a new principal with a fresh key (its private key in its own file).
    Add {
        /// The deployment directory (or its audita.toml).
        dir: PathBuf,
        /// Principal name.
        name: String,
        /// Role (planner, dispatcher, supervisor, controller, sensor, agent, …).
        #[arg(long)]
        role: String,
        /// Where to write the private key (default keys/principals/NAME.key).
        #[arg(long)]
        key_out: Option<PathBuf>,
        /// Record time (ms) from which the key may sign (default: always).
        #[arg(long)]
        valid_from_ms: Option<u64>,
    },
    /// Give a principal a fresh key from `--at-ms` on (the old key's window closes).
    Rotate {
        /// The deployment directory (or its audita.toml).
        dir: PathBuf,
        /// Principal name.
        name: String,
        /// Where to write the new private key.
        #[arg(long)]
        key_out: Option<PathBuf>,
        /// Record time (ms) of the rotation (default: now).
        #[arg(long)]
        at_ms: Option<u64>,
    },
    /// Revoke a principal's current key at `--at-ms` (compromise): nothing it signs
    /// after certifies.
    Revoke {
        /// The deployment directory (or its audita.toml).
        dir: PathBuf,
        /// Principal name.
        name: String,
        /// Record time (ms) of the revocation (default: now).
        #[arg(long)]
        at_ms: Option<u64>,
    },
}

/// `audita fleet register DIR`.
#[derive(Args, Debug)]
pub struct FleetArgs {
    #[command(subcommand)]
    pub command: FleetCommand,
}

/// The simulated fleet as a client of a deployment.
#[derive(Subcommand, Debug)]
pub enum FleetCommand {
    /// Register the simulated fleet's principals (fresh keys) and install its duty
    /// registry in the deployment.
    Register {
        /// The deployment directory (or its audita.toml).
        dir: PathBuf,
        #[command(flatten)]
        fleet: FleetShape,
    },
}

/// The simulated fleet's shape (the same in `fleet register` and `feed`).
#[derive(Args, Debug, Clone)]
pub struct FleetShape {
    /// Facility cells.
    #[arg(long, default_value_t = 64)]
    pub cells: usize,
    /// Scenario seed (the fleet's content, not its keys).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

impl FleetShape {
    /// The shape as the fleet client takes it.
    pub fn shape(&self) -> client::Shape {
        client::Shape {
            cells: self.cells,
            seed: self.seed,
        }
    }
}

use audita_pipeline::process::config_path;

/// `VKEY@URL` as (name, vkey, url); the name is the vkey's.
fn remote_keeper(arg: &str) -> Result<(String, String, String), String> {
    let (vkey, url) = arg
        .split_once('@')
        .ok_or_else(|| format!("--keeper {arg:?}: expected VKEY@URL"))?;
    let name = vkey
        .split('+')
        .next()
        .filter(|n| !n.is_empty() && vkey.contains('+'))
        .ok_or_else(|| format!("--keeper {arg:?}: {vkey:?} is not a note verifier key"))?;
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(format!(
            "--keeper {arg:?}: the URL must be http:// or https://"
        ));
    }
    Ok((name.to_string(), vkey.to_string(), url.to_string()))
}

pub fn run_init(args: &InitArgs) -> i32 {
    let remote: Result<Vec<_>, String> = args.keepers.iter().map(|k| remote_keeper(k)).collect();
    let remote_keepers = match remote {
        Ok(r) => r,
        Err(e) => {
            eprintln!("audita init: {e}");
            return 2;
        }
    };
    let opts = InitOptions {
        local_keepers: args.local_keepers.clone(),
        insecure_demo_seed: args.insecure_demo_keys.then_some(args.seed).flatten(),
        remote_keepers,
    };
    match audita_deploy::init_with(&args.dir, &args.origin, &opts) {
        Ok(made) => {
            println!("deployment: {}", made.config.display());
            println!("log vkey:   {}", made.log_vkey);
            if opts.insecure_demo_seed.is_some() {
                eprintln!("audita init: INSECURE: every key derives from the public --seed (tests and demos only)");
            }
            0
        }
        Err(e) => {
            eprintln!("audita init: {e}");
            2
        }
    }
}

pub fn run_principal(args: &PrincipalArgs) -> i32 {
    let result = match &args.command {
        PrincipalCommand::Add {
            dir,
            name,
            role,
            key_out,
            valid_from_ms,
        } => audita_deploy::add_principal(
            &config_path(dir),
            name,
            role,
            key_out.as_deref(),
            *valid_from_ms,
        )
        .map(|k| format!("{}\nprivate key: {}", k.vkey, k.key_file.display())),
        PrincipalCommand::Rotate {
            dir,
            name,
            key_out,
            at_ms,
        } => audita_deploy::rotate_principal(
            &config_path(dir),
            name,
            key_out.as_deref(),
            at_ms.unwrap_or_else(audita_deploy::now_ms),
        )
        .map(|k| format!("{}\nprivate key: {}", k.vkey, k.key_file.display())),
        PrincipalCommand::Revoke { dir, name, at_ms } => {
            let at = at_ms.unwrap_or_else(audita_deploy::now_ms);
            audita_deploy::revoke_principal(&config_path(dir), name, at)
                .map(|()| format!("{name}: current key revoked at {at} ms"))
        }
    };
    match result {
        Ok(text) => {
            println!("{text}");
            0
        }
        Err(e) => {
            eprintln!("audita principal: {e}");
            2
        }
    }
}

pub fn run_fleet(args: &FleetArgs) -> i32 {
    match &args.command {
        FleetCommand::Register { dir, fleet } => {
            match client::register(&config_path(dir), &fleet.shape()) {
                Ok(n) => {
                    println!("registered {n} fleet principals, its duty registry and its adverse predicates");
                    0
                }
                Err(e) => {
                    eprintln!("audita fleet register: {e:#}");
                    2
                }
            }
        }
    }
}
