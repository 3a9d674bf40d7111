//! Verifiers the test plays itself: the round's draw as our key pairs, and commit–reveal of the
//! verdicts and sketches a test chooses (what `ergon-worker verify` would find is the attack
//! suite's business; here the chain's part runs for real).

use std::time::Duration;

use ergon_client::keys::Signer;
use ergon_protocol::{
    commitments::{self, Verdict},
    Sketch,
};
use serde_json::{json, Value};

use crate::{chain::calls, wait_for, Node};

/// How long one draw may take: availability, then the VRF outputs of the 16 blocks after the round
/// opened (about 96 s), with a wide margin for slow blocks on a loaded machine.
pub const DRAW: Duration = Duration::from_secs(700);

/// Waits until round `number` of `job` has drawn its verifiers; returns the round's JSON view.
pub fn drawn_round(node: &Node, job: u64, number: u64) -> Value {
    wait_for(&format!("round {number} of job {job} to draw"), DRAW, || {
        let view = node.call("ergon_job", json!([job])).ok()?;
        assert_eq!(view["state"]["status"], "verifying", "job {job} ended early: {view}");
        let round = &view["round"];
        (round["number"] == number && round["phase"] == "commit").then(|| round.clone())
    })
}

/// The drawn verifiers of `round` with their segments, as our key pairs (each must be one of
/// `pairs`).
pub fn assignments<'a>(round: &Value, pairs: &'a [Signer]) -> Vec<(&'a Signer, Vec<u32>)> {
    round["votes"]
        .as_array()
        .expect("votes")
        .iter()
        .map(|vote| {
            let address = vote["verifier"].as_str().expect("an address");
            let pair = pairs
                .iter()
                .find(|p| p.public_key().to_account_id().to_string() == address)
                .expect("one of ours");
            let segments = serde_json::from_value(vote["segments"].clone()).expect("segments");
            (pair, segments)
        })
        .collect()
}

/// One played vote: who, its segments, its verdict, and (for a pass) its sketches of each segment,
/// one per probe step.
pub type PlayedVote<'a> = (&'a Signer, Vec<u32>, Verdict, Vec<Vec<Sketch>>);

/// Every vote commits, then (once `trainer`, when the test plays it too, has given its evidence:
/// none) every vote reveals. Salts are fresh per vote; the report is a hash standing for one.
pub fn vote(node: &Node, job: u64, round: u32, trainer: Option<&Signer>, votes: &[PlayedVote]) {
    let salt = |i: usize| [round as u8 * 16 + i as u8 + 1; 32];
    let report = [0xee; 32];
    let commits: Vec<_> = votes
        .iter()
        .enumerate()
        .map(|(i, (who, _, verdict, sketches))| {
            let c = commitments::verdict(
                job,
                round,
                &who.public_key().0,
                *verdict,
                sketches,
                &report,
                &salt(i),
            );
            (calls::commit_verdict(job, c), *who)
        })
        .collect();
    node.send_all(&commits, Duration::from_secs(120));
    if let Some(trainer) = trainer {
        node.send(calls::submit_trainer_evidence(job, &[]), trainer, Duration::from_secs(120));
    }
    let reveals: Vec<_> = votes
        .iter()
        .enumerate()
        .map(|(i, (who, _, verdict, sketches))| {
            (calls::reveal_verdict(job, *verdict, sketches, report, salt(i)), *who)
        })
        .collect();
    node.send_all(&reveals, Duration::from_secs(120));
}

/// The fee of a vote that replayed `replayed` of `segments` segments at `price` (at least the
/// runtime's `ReplayPricePerUt` for the work: true of every job the tests price), on a job whose
/// rules and metrics cost `overhead_ppb` of its training: the price's share of that work plus the
/// 20% markup, rounded up (the runtime's parameters, as a test vector).
pub fn fee(price: u128, segments: u64, replayed: u128, overhead_ppb: u64) -> u128 {
    let share = replayed * 1_000_000_000 + overhead_ppb as u128 * segments as u128;
    (price * share * 6).div_ceil(5 * segments as u128 * 1_000_000_000)
}
