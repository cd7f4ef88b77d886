//! `audita keeper serve|generate-key|evidence`: a keeper as an independent C2SP
//! tlog-witness service (`audita_keeper`), run by a party other than the log's
//! operator with a key the operator never holds.

use audita_keeper::KeeperFile;
use clap::{Args, Subcommand};
use std::path::PathBuf;

/// `audita keeper …`.
#[derive(Args)]
pub struct KeeperArgs {
    #[command(subcommand)]
    pub command: KeeperCommand,
}

/// What to do.
#[derive(Subcommand)]
pub enum KeeperCommand {
    /// Serve `POST /add-checkpoint` (and `GET /healthz`) until stopped; prints
    /// `listening ADDR` and `vkey VKEY` once it accepts.
    Serve {
        /// The keeper's configuration (keeper.toml: name, key file, followed logs,
        /// state directory, limits; see keeper/README.md).
        #[arg(long)]
        config: PathBuf,
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:7380")]
        listen: String,
    },
    /// Create a keeper key (OS randomness, file mode 0600) and print its
    /// `cosignature/v1` verifier key, to publish and list in deployments.
    GenerateKey {
        /// Where to write the private key.
        key_file: PathBuf,
        /// The keeper's name (its co-signature lines carry it).
        name: String,
    },
    /// Print the conflicting checkpoints the keeper refused (equivocation evidence,
    /// `audita.keeper-evidence/v1` JSON), each checkable with the log's public key.
    Evidence {
        /// The keeper's state directory.
        state_dir: PathBuf,
    },
}

pub fn run(args: &KeeperArgs) -> i32 {
    let result = (|| -> anyhow::Result<()> {
        match &args.command {
            KeeperCommand::Serve { config, listen } => {
                let config = KeeperFile::load(config)?;
                let listener = std::net::TcpListener::bind(listen)
                    .map_err(|e| anyhow::anyhow!("--listen {listen}: {e}"))?;
                let handle = audita_keeper::serve(&config, listener)?;
                println!("listening {}", handle.addr());
                println!("vkey {}", handle.vkey());
                handle.wait();
                Ok(())
            }
            KeeperCommand::GenerateKey { key_file, name } => {
                println!("{}", audita_keeper::generate_key(key_file, name)?);
                Ok(())
            }
            KeeperCommand::Evidence { state_dir } => {
                let records = audita_keeper::evidence(state_dir)?;
                println!("{}", serde_json::to_string_pretty(&records)?);
                Ok(())
            }
        }
    })();
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("audita keeper: {e:#}");
            2
        }
    }
}
