//! Key validity windows for the whole-record targets (`record_verify`,
//! `proven_verify`): the sample's keys as-is, or with the busiest author's key
//! restricted in record time — rotated away (window closed at the median of its
//! messages' timestamps, a fresh key that signed nothing open after), revoked at
//! that instant, or not yet valid before it. The input picks the variant, so the
//! fuzzer drives the windowed paths (`principal_at`, `check_signer`'s
//! `KeyNotValid`, the batch path's per-time key choice) with every edit it makes.
//!
//! Guarantee the targets assert with it: a certified envelope of the restricted
//! author was signed at a time its key's window covers. [`variants`] checks at
//! start-up that each restriction is live (the unedited sample certifies some but
//! not all of that author's messages), so no variant is vacuous.

use std::collections::BTreeMap;

use audita_evidence::sample::Sample;
use audita_evidence::{derive_signing_key, verify_record, KeyRegistry, KeyWindow};

/// The author whose key a variant restricts, with the window of the key that
/// signed its messages.
pub type Restriction = Option<(String, KeyWindow)>;

/// The four key registries: index 0 is the sample's, 1 rotated, 2 revoked,
/// 3 not yet valid.
pub fn variants(s: &Sample) -> Vec<(KeyRegistry, Restriction)> {
    let mut by_author: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    for e in &s.envelopes {
        let env = e.envelope();
        by_author
            .entry(env.author.as_str())
            .or_default()
            .push(env.timestamp);
    }
    let (author, mut times) = by_author
        .into_iter()
        .max_by_key(|(_, t)| t.len())
        .map(|(a, t)| (a.to_owned(), t))
        .unwrap();
    times.sort_unstable();
    let t = times[times.len() / 2];
    let closed = |revoked| KeyWindow {
        from_ms: None,
        until_ms: Some(t - 1),
        revoked,
    };
    let not_yet = KeyWindow {
        from_ms: Some(t),
        until_ms: None,
        revoked: false,
    };
    let fresh = derive_signing_key(0xf0e1, &author).verifying_key();
    let mut out = vec![(s.keys.clone(), None)];
    for (window, successor) in [
        (
            closed(false),
            Some(KeyWindow {
                from_ms: Some(t),
                until_ms: None,
                revoked: false,
            }),
        ),
        (closed(true), None),
        (not_yet, None),
    ] {
        let mut keys = KeyRegistry::new();
        for (id, k) in s.keys.principals() {
            if id.as_str() == author {
                keys.add_principal_key(id.clone(), *k, window);
                if let Some(w) = successor {
                    keys.add_principal_key(id.clone(), fresh, w);
                }
            } else {
                keys.add_principal(id.clone(), *k);
            }
        }
        for (n, k) in s.keys.keepers() {
            keys.add_keeper(n, *k).unwrap();
        }
        for (n, k) in s.keys.logs() {
            keys.add_log(n, *k).unwrap();
        }
        let of_author = verify_record(&s.record, &keys)
            .certified
            .values()
            .filter(|c| c.envelope.envelope().author.as_str() == author)
            .count();
        assert!(
            of_author > 0 && of_author < times.len(),
            "a key window variant certifies {of_author} of {} messages of {author}",
            times.len()
        );
        out.push((keys, Some((author.clone(), window))));
    }
    out
}

/// Panics unless every certified envelope of the restricted author was signed
/// inside its key's window.
pub fn assert_windows<'a>(
    restriction: &Restriction,
    certified: impl Iterator<Item = &'a audita_evidence::Certified>,
) {
    let Some((author, window)) = restriction else {
        return;
    };
    for c in certified {
        let env = c.envelope.envelope();
        if env.author.as_str() == author {
            assert!(
                window.check(env.timestamp).is_ok(),
                "{author}'s message at {} certified outside its key window {window:?}",
                env.timestamp
            );
        }
    }
}
