//! Proof-of-Hashrate fairness by simulation (run by `scripts/bench-poh.sh`; a benchmark, not a test).
//!
//! Four BABE authorities with weights 1 : 2 : 4 : 8 (the ECP seeded by `--chain local`) draw primary
//! slots with sc-consensus-babe's own `claim_slot` — real sr25519 VRF outputs checked against BABE's
//! real threshold `1 − (1 − c)^θ` — over many slots. Prints each authority's share of slots won against
//! the formula, and the empty-slot rate against `(1 − c)`.
//!
//! Usage: poh_simulation [SLOTS]   (default 100000)

use sc_consensus_babe::{authorship::claim_slot, Epoch};
use sp_consensus_babe::{
    AllowedSlots, AuthorityId, BabeEpochConfiguration, Slot, KEY_TYPE as BABE,
};
use sp_keystore::{Keystore, KeystorePtr};

fn main() {
    let slots: u64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let weights = [1u64, 2, 4, 8];
    let c = ergon_runtime::units::PRIMARY_PROBABILITY;

    // One keystore per authority, so each claim is evaluated for that authority alone.
    let mut keystores: Vec<KeystorePtr> = Vec::new();
    let mut authorities = Vec::new();
    for (i, w) in weights.iter().enumerate() {
        let store: KeystorePtr = sc_keystore::LocalKeystore::in_memory().into();
        let public = store
            .sr25519_generate_new(BABE, Some(&format!("//poh-sim-{i}")))
            .expect("in-memory keystore generates keys");
        authorities.push((AuthorityId::from(public), *w));
        keystores.push(store);
    }
    let epoch: Epoch = sp_consensus_babe::Epoch {
        epoch_index: 1,
        start_slot: Slot::from(0),
        duration: slots,
        authorities,
        randomness: [7u8; 32],
        config: BabeEpochConfiguration { c, allowed_slots: AllowedSlots::PrimarySlots },
    }
    .into();

    let mut wins = [0u64; 4];
    let mut empty = 0u64;
    let mut contested = 0u64;
    for slot in 0..slots {
        let mut winners = 0;
        for (i, store) in keystores.iter().enumerate() {
            if claim_slot(Slot::from(slot), &epoch, store).is_some() {
                wins[i] += 1;
                winners += 1;
            }
        }
        if winners == 0 {
            empty += 1;
        } else if winners > 1 {
            contested += 1;
        }
    }

    let total: u64 = weights.iter().sum();
    let cf = c.0 as f64 / c.1 as f64;
    println!("slots {slots}, c = {}/{}", c.0, c.1);
    println!(
        "{:>9} {:>7} {:>10} {:>10} {:>9} {:>8}",
        "authority", "weight", "win rate", "formula", "z-score", "share"
    );
    let mut chi2 = 0.0;
    for (i, w) in weights.iter().enumerate() {
        let theta = *w as f64 / total as f64;
        let p = 1.0 - (1.0 - cf).powf(theta);
        let rate = wins[i] as f64 / slots as f64;
        let z = (rate - p) / (p * (1.0 - p) / slots as f64).sqrt();
        chi2 += z * z;
        let share = wins[i] as f64 / wins.iter().sum::<u64>() as f64;
        println!("{:>9} {:>7} {:>10.5} {:>10.5} {:>9.2} {:>7.1}%", i, w, rate, p, z, 100.0 * share);
    }
    println!(
        "empty-slot rate {:.4} (formula (1 - c) = {:.4}); slots with several primary winners {:.4}",
        empty as f64 / slots as f64,
        1.0 - cf,
        contested as f64 / slots as f64
    );
    println!(
        "chi-square of the four win rates against the formula: {chi2:.2} (4 dof; 95% bound 9.49)"
    );
}
