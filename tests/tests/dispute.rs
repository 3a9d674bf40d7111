//! A forged bundle on a live dev chain, judged by a dispute: the verifier whose own segments hold
//! the forgery fails one of them; the fail opens a dispute in which five other verifiers replay that
//! segment; the dispute upholds the fail, so the trainer loses its collateral, the honest verifier
//! is paid, the regular-round verifier that passed the same segment without replaying it is
//! slashed (every segment has two verifiers), and the dispute verifier that passed the forgery is
//! not paid.
//!
//! The test plays the verifiers (what `ergon-worker verify` finds on forged bundles is the attack
//! suite's business); the chain's part — the draws from fresh randomness, the per-verifier
//! segments, the commit–reveal, the dispute and its settlement — runs for real. Two draws each wait
//! for the VRF outputs of the 16 blocks after their round opened (about 96 s).

use std::{collections::HashMap, time::Duration};

use ergon_bundle::MANIFEST_FILE;
use ergon_client::keys::Signer;
use ergon_integration_tests::{
    bundle_server::{synthetic_bundle, BundleServer},
    chain::{calls, Bond},
    dev_pair,
    played::{self, assignments, drawn_round, fee},
    wait_for, Node, Ports,
};
use ergon_protocol::{commitments::Verdict, Sketch};
use serde_json::json;

use ergon_protocol::units::ERG;
/// Ten well-known accounts besides Alice (owner, validator) and Bob (trainer): three verifiers for
/// the regular round and five others for the dispute (nobody verifies one job twice), with room.
const VERIFIERS: [&str; 10] = [
    "//Charlie",
    "//Dave",
    "//Eve",
    "//Ferdie",
    "//Alice//stash",
    "//Bob//stash",
    "//Charlie//stash",
    "//Dave//stash",
    "//Eve//stash",
    "//Ferdie//stash",
];
fn ledger(node: &Node, who: &Signer) -> Bond {
    node.bond(&who.public_key().0).expect("the account is bonded")
}

fn free(node: &Node, who: &Signer) -> u128 {
    node.account(&who.public_key().0).free
}

/// The sketches every verifier of `segment` reveals here (the test plays the verifiers: they
/// agree; the chain compares them probe by probe).
fn sketch(segment: u32) -> Vec<Sketch> {
    vec![Sketch { exponent: -30, deviation: [(segment as i32 + 1) << 20; 8], scale: 1 << 29 }; 2]
}

/// The played votes of `drawn`, each with its verdict (`verdict_of` its index and segments); a
/// pass carries the agreed sketches of its segments. The trainer (a forger, played too) gives no
/// evidence of its own.
fn vote(
    node: &Node,
    job: u64,
    round: u32,
    trainer: &Signer,
    drawn: &[(&Signer, Vec<u32>, Verdict)],
) {
    let votes: Vec<_> = drawn
        .iter()
        .map(|(who, own, verdict)| {
            let sketches =
                if verdict.is_pass() { own.iter().map(|s| sketch(*s)).collect() } else { vec![] };
            (*who, own.clone(), *verdict, sketches)
        })
        .collect();
    played::vote(node, job, round, Some(trainer), &votes);
}

#[test]
fn a_lone_fail_opens_a_dispute_that_slashes_the_forger_and_pays_the_honest_verifier() {
    let dir = tempfile::tempdir().expect("temp dir");
    let args: Vec<String> = ["--dev", "--tmp"].iter().map(|s| s.to_string()).collect();
    let node = Node::start("dev", Ports::free(), &args, dir.path());
    node.wait_finalized(1, Duration::from_secs(180));

    let spec: ergon_job_spec::JobSpec =
        serde_json::from_str(include_str!("../../worker/examples/fashion-mnist-mlp.json"))
            .expect("example spec parses");
    let checkpoints = spec.validate().expect("example spec is valid").checkpoints;
    let segments = checkpoints - 1;
    // Its checkpoint files are no model at all: every segment of it is a forgery.
    let (manifest, file, root) = synthetic_bundle(checkpoints);
    let server = BundleServer::start(HashMap::from([
        (format!("/job/{MANIFEST_FILE}"), manifest),
        ("/job/ckpt-00000000.safetensors".to_string(), file),
    ]));
    let (alice, bob) = (dev_pair("//Alice"), dev_pair("//Bob"));
    let pairs: Vec<Signer> = VERIFIERS.iter().map(|uri| dev_pair(uri)).collect();

    // Bob bonds to train; the ten others bond the minimum plus one verification's collateral and
    // opt in as verifiers, before the job exists (the draws only take verifiers that joined before
    // their randomness began).
    let mut bonds = vec![(calls::bond(2_000 * ERG), &bob)];
    bonds.extend(pairs.iter().map(|v| (calls::bond(1_100 * ERG), v)));
    node.send_all(&bonds, Duration::from_secs(120));
    let joins: Vec<_> = pairs
        .iter()
        .map(|v| (calls::set_verifier(ergon_integration_tests::TEST_VERIFIER_OFFER), v))
        .collect();
    node.send_all(&joins, Duration::from_secs(120));

    // Alice posts a 100 ERG job, Bob takes it at 30 ERG and commits the forged bundle.
    let (budget, price) = (100 * ERG, 30 * ERG);
    let overhead = ergon_protocol::overhead::overhead_ppb(
        spec.train.samples,
        spec.epochs,
        spec.validation.samples,
    );
    let timeout = Duration::from_secs(120);
    let best = node.block_number(None).expect("best block");
    node.send(calls::post_job(&spec, budget, 5, best + 500), &alice, timeout);
    let job = 0;
    node.send(calls::bid(job, price, ergon_protocol::DeviceClass::Cpu), &bob, timeout);
    node.send(calls::accept_bid(job, &bob.public_key().0), &alice, timeout);
    let uri = format!("http://127.0.0.1:{}/job", server.port);
    node.send(
        calls::submit_bundle(
            job,
            root,
            &uri,
            [6; 32],
            calls::NO_CLAIMS,
            ergon_protocol::DeviceClass::Cpu,
        ),
        &bob,
        timeout,
    );
    let view = node.call("ergon_job", json!([job])).expect("ergon_job");
    assert_eq!(view["state"]["status"], "verifying", "{view}");
    let trainer_bond = ledger(&node, &bob).active;
    let balances: Vec<u128> = pairs.iter().map(|p| free(&node, p)).collect();

    // Round 0: three verifiers with four segments each, every segment shared by two of them.
    let round = drawn_round(&node, job, 0);
    let regular = assignments(&round, &pairs);
    assert_eq!(regular.len(), 3, "{round}");
    let mut all: Vec<u32> = regular.iter().flat_map(|(_, s)| s.clone()).collect();
    assert!(regular.iter().all(|(_, s)| s.len() == 4), "{round}");
    all.sort();
    assert!(all.chunks(2).all(|pair| pair[0] == pair[1]), "each segment twice: {round}");
    all.dedup();
    assert_eq!(all.len(), 6, "six distinct segments: {round}");
    assert!(all.iter().all(|&s| u64::from(s) < segments), "{round}");

    // The first replays its segments and fails the first; the two others pass theirs, and the one
    // that shares the failed segment passes it without replaying (as a lazy verifier would).
    let disputed = regular[0].1[0];
    let partner = regular[1..].iter().find(|(_, own)| own.contains(&disputed)).expect("paired").0;
    let verdicts: Vec<_> = regular
        .iter()
        .enumerate()
        .map(|(i, (who, own))| {
            let verdict = if i == 0 { Verdict::Fail { segment: disputed } } else { Verdict::Pass };
            (*who, own.clone(), verdict)
        })
        .collect();
    vote(&node, job, 0, &bob, &verdicts);

    // A lone fail without a two-thirds majority is not outvoted: it opens a dispute on its segment.
    let view = node.call("ergon_job", json!([job])).expect("ergon_job");
    assert_eq!(view["state"]["status"], "verifying", "{view}");
    assert_eq!(view["round"]["number"], 1, "{view}");
    assert_eq!(view["round"]["disputed"], json!([disputed]), "{view}");

    // Round 1, the dispute: five others, all replaying the disputed segment.
    let round = drawn_round(&node, job, 1);
    let dispute = assignments(&round, &pairs);
    assert_eq!(dispute.len(), 5, "{round}");
    for (who, own) in &dispute {
        assert_eq!(own, &vec![disputed], "{round}");
        assert!(
            regular.iter().all(|(r, _)| r.public_key().0 != who.public_key().0),
            "a fresh verifier"
        );
    }
    // Four find the forgery again; one passes without replaying.
    let lazy = dispute[4].0;
    let verdicts: Vec<_> = dispute
        .iter()
        .enumerate()
        .map(|(i, (who, own))| {
            let verdict = if i == 4 { Verdict::Pass } else { Verdict::Fail { segment: disputed } };
            (*who, own.clone(), verdict)
        })
        .collect();
    vote(&node, job, 1, &bob, &verdicts);

    let view = wait_for("the job to fail", Duration::from_secs(120), || {
        let view = node.call("ergon_job", json!([job])).ok()?;
        (view["state"]["status"] == "failed").then_some(view)
    });
    assert_eq!(view["state"]["reason"], "Rejected", "{view}");

    // The forger loses its whole collateral, the price it bid.
    let after = ledger(&node, &bob);
    assert_eq!(after.active, trainer_bond - price, "the trainer is slashed");
    assert_eq!(after.obligations, 0, "the trainer's obligation is closed");

    // The regular-round pass on the disputed segment is proven wrong: 10 % of its 100 ERG
    // collateral, paid in equal parts to those the dispute proved right (the lone honest fail and
    // the four dispute fails: 2 ERG each). Every other verifier the dispute did not prove wrong is
    // paid for the segments it was given. The lazy dispute verifier, outvoted in the last round, is
    // paid nothing; it keeps its collateral (an outvoted vote of the last round is never slashed: it
    // could be the honest one). The drawn paid two transaction fees since (well under a milli-ERG
    // each).
    let tx_fees = ERG / 100;
    let (slash, right) = (10 * ERG, 5);
    let proven_right: Vec<_> =
        std::iter::once(regular[0].0).chain(dispute.iter().take(4).map(|(p, _)| *p)).collect();
    for (i, v) in pairs.iter().enumerate() {
        let name = VERIFIERS[i];
        let gained = free(&node, v) as i128 - balances[i] as i128;
        let drawn =
            regular.iter().chain(&dispute).find(|(p, _)| p.public_key().0 == v.public_key().0);
        let is = |p: &Signer| p.public_key().0 == v.public_key().0;
        let expected =
            match drawn {
                _ if is(lazy) || is(partner) => 0,
                Some((_, own)) => fee(price, segments, own.len() as u128, overhead) as i128,
                None => 0,
            } + if proven_right.iter().any(|p| is(p)) { (slash / right) as i128 } else { 0 };
        if drawn.is_some() {
            assert!(
                gained <= expected && gained >= expected - tx_fees as i128,
                "{name}: gained {gained}, expected {expected} less transaction fees"
            );
        } else {
            assert_eq!(gained, 0, "{name} was not drawn");
        }
        let ledger = ledger(&node, v);
        let bond = if is(partner) { 1_100 * ERG - slash } else { 1_100 * ERG };
        assert_eq!(ledger.active, bond, "{name}: only the lazy regular pass is slashed");
        assert_eq!(ledger.obligations, 0, "{name}: collateral released");
    }
}
