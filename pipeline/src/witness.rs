//! The sealer's keepers that run as tlog-witness services: each reached with
//! `audita_keeper`'s blocking client, behind the sealer's [`Witness`] interface.
//!
//! Design constraints:
//! - One request costs at most [`REQUEST_TIMEOUT`]: the sealer backs a keeper off
//!   after a failure, so a keeper that hangs slows sealing by one timeout per
//!   back-off period at most.
//! - Transport failures, timeouts, 408 and 5xx are *unavailable* (retried later);
//!   other statuses and malformed answers are *refused* for that checkpoint; the
//!   sealer verifies every returned line itself.

use crate::Deployment;
use audita_evidence::Hash;
use audita_keeper::{ClientError, Outcome, WitnessClient};
use audita_sealer::witness::{Answer, Witness};
use std::time::Duration;

/// The longest one `add-checkpoint` request may take.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(3);

/// A keeper service at a URL.
pub struct HttpWitness {
    name: String,
    client: WitnessClient,
}

impl HttpWitness {
    /// The keeper `name` whose tlog-witness submission prefix is `url`.
    pub fn new(name: &str, url: &str) -> HttpWitness {
        HttpWitness {
            name: name.to_string(),
            client: WitnessClient::new(url, REQUEST_TIMEOUT),
        }
    }
}

impl Witness for HttpWitness {
    fn name(&self) -> &str {
        &self.name
    }

    fn add_checkpoint(&mut self, old_size: u64, proof: &[Hash], note: &str) -> Answer {
        match self.client.add_checkpoint(old_size, proof, note.as_bytes()) {
            Ok(Outcome::Cosigned(lines)) => Answer::Cosigned(lines.concat()),
            Ok(Outcome::Conflict(size)) => Answer::Conflict(size),
            Err(e @ ClientError::Transport { .. }) => Answer::Unavailable(e.to_string()),
            Err(e) if e.is_transient() => Answer::Unavailable(e.to_string()),
            Err(e) => Answer::Refused(e.to_string()),
        }
    }
}

/// The deployment's keeper services as the sealer's witnesses.
pub fn remote(d: &Deployment) -> Vec<Box<dyn Witness>> {
    d.remote_keepers
        .iter()
        .map(|(name, url)| Box::new(HttpWitness::new(name, url)) as Box<dyn Witness>)
        .collect()
}
