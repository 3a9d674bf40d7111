//! Lazy verifiers against an honest trainer, on a live dev chain (issue 34, test (a)): the three
//! seats of the regular round never replay and pass with the same guess — a trajectory that runs
//! straight between the checkpoints, the chord, so they agree with each other without colluding.
//! Bob's trainer daemon replays the drawn segments of its own bundle and gives the chain its
//! sketches once the seats are bound by their commitments; they disagree with the guess, so the
//! segments are disputed. Charlie's and Dave's verifier daemons, which joined the pool after the
//! bundle commitment (too late for the first draw, in time for the dispute), replay them: their
//! sketches confirm Bob's, the lazy seats lose a tenth of their collateral, partly to Bob, and Bob
//! is paid his price.
//!
//! The test plays the lazy seats; Bob, Charlie and Dave are real daemons. Two draws each wait for
//! the VRF outputs of the 16 blocks after their round opened (about 96 s).

use std::{path::Path, time::Duration};

use ergon_client::keys::Signer;
use ergon_integration_tests::{
    chain::calls,
    check, daemon_args, dev_pair, job_view,
    played::{self, assignments, drawn_round},
    post_job_as_alice, wait_for, Daemon, Node, Ports,
};
use ergon_protocol::{commitments::Verdict, evidence, Sketch};

use ergon_protocol::units::ERG;
/// The lazy seats: bonded and in the pool before the job exists, so the first draw takes them.
const LAZY: [&str; 3] = ["//Eve", "//Ferdie", "//Charlie//stash"];

#[test]
fn lazy_verifiers_agreeing_on_the_chord_lose_to_the_trainers_evidence() {
    let dir = tempfile::tempdir().expect("temp dir");
    let args: Vec<String> = ["--dev", "--tmp"].iter().map(|s| s.to_string()).collect();
    let node = Node::start("dev", Ports::free(), &args, dir.path());
    node.wait_finalized(1, Duration::from_secs(180));
    let timeout = Duration::from_secs(120);
    let start = |name: &str, key: &str, roles: &str| {
        Daemon::start(name, &daemon_args(&node, key, roles, dir.path(), name), dir.path())
    };

    // Bob trains; the three lazy seats bond the minimum plus one seat's collateral and join.
    let bob = start("bob", "//Bob", "trainer");
    let lazy: Vec<Signer> = LAZY.iter().map(|k| dev_pair(k)).collect();
    let bonds: Vec<_> = lazy.iter().map(|v| (calls::bond(1_100 * ERG), v)).collect();
    node.send_all(&bonds, timeout);
    let joins: Vec<_> = lazy
        .iter()
        .map(|v| (calls::set_verifier(ergon_integration_tests::TEST_VERIFIER_OFFER), v))
        .collect();
    node.send_all(&joins, timeout);
    let bob_account = dev_pair("//Bob").public_key().0;
    wait_for("Bob's daemon to bond", Duration::from_secs(180), || {
        node.bond(&bob_account).filter(|b| b.active >= 2_000 * ERG)
    });

    // Alice posts the example job; Bob's daemon bids, wins, trains and commits the bundle.
    let spec_path =
        ergon_integration_tests::repo_dir().join("worker/examples/fashion-mnist-mlp.json");
    let spec = example_spec(&spec_path);
    let job = post_job_as_alice(node.ports.rpc, &spec_path);
    wait_for("Bob's bundle commitment", Duration::from_secs(600), || {
        let view = job_view(&node, job);
        (view["state"]["status"] == "verifying").then_some(())
    });
    let price: u128 = job_view(&node, job)["state"]["price"]
        .as_str()
        .and_then(|p| p.parse().ok())
        .expect("the price");

    // The honest verifiers join now: after the commitment, so only a later round can draw them.
    let charlie = start("charlie", "//Charlie", "verifier");
    let dave = start("dave", "//Dave", "verifier");
    for daemon in [&charlie, &dave] {
        wait_for("the honest verifiers to join the pool", Duration::from_secs(240), || {
            daemon.log().contains("joining the verifier pool: in a block").then_some(())
        });
    }
    let all = vec![&bob, &charlie, &dave];

    // Round 0: the three lazy seats, each with four segments, every one shared by two of them.
    let round = drawn_round(&node, job, 0);
    let drawn = assignments(&round, &lazy);
    assert_eq!(drawn.len(), 3, "{round}");
    let bonds_before: Vec<u128> = lazy.iter().map(|v| ledger_active(&node, v)).collect();
    let bob_before = node.account(&bob_account).free;
    // Each passes every segment with the straight guess at each probe step: no deviation from
    // the chord (its scale made up: the smaller of two scales counts, so it cannot widen the
    // tolerance). Their sketches agree with each other.
    let guess = |segment: u32| -> Vec<Sketch> {
        let (from, to) = segment_steps(&spec, segment);
        let straight = Sketch { exponent: -30, deviation: [0; 8], scale: 1 << 29 };
        vec![straight; evidence::probe_steps(from, to).len()]
    };
    let votes: Vec<_> = drawn
        .iter()
        .map(|(who, own)| {
            (*who, own.clone(), Verdict::Pass, own.iter().map(|s| guess(*s)).collect())
        })
        .collect();
    played::vote(&node, job, 0, None, &votes);

    // Bob's evidence disagrees with every lazy pass: the segments are contested and disputed.
    let round = drawn_round(&node, job, 1);
    check(
        round["disputed"].as_array().is_some_and(|d| !d.is_empty()),
        &format!("a dispute: {round}"),
        &all,
    );
    let view = wait_for("the job to settle", Duration::from_secs(900), || {
        let view = job_view(&node, job);
        (view["state"]["status"] != "verifying").then_some(view)
    });
    check(
        view["state"]["status"] == "completed",
        &format!("Bob's honest bundle completes: {view}"),
        &all,
    );
    check(bob.log().contains("evidence given"), "Bob's daemon gave its own evidence", &all);

    // Every lazy seat held a disputed segment: each loses 10 % of its 100 ERG collateral, unpaid.
    for (i, v) in lazy.iter().enumerate() {
        let after = ledger_active(&node, v);
        assert_eq!(after, bonds_before[i] - 10 * ERG, "{}: slashed", LAZY[i]);
    }
    // Bob is paid his price (less the burn) and shares the slashes with the dispute's seats.
    let burnt = price / 10;
    let gained = node.account(&bob_account).free - bob_before;
    assert!(gained > price - burnt, "Bob gained {gained}, more than his price less the burn");
    assert_eq!(node.bond(&bob_account).expect("bonded").active, 2_000 * ERG, "Bob keeps his bond");
}

/// The example spec, parsed (the worker validates it; here only its steps matter).
fn example_spec(path: &Path) -> ergon_job_spec::JobSpec {
    serde_json::from_slice(&std::fs::read(path).expect("example spec")).expect("a spec")
}

/// The steps `from → to` of segment `i`: checkpoints every `checkpoint_interval` steps, the last at
/// the end of the training.
fn segment_steps(spec: &ergon_job_spec::JobSpec, i: u32) -> (u64, u64) {
    let summary = spec.validate().expect("the example is valid");
    let every = u64::from(spec.checkpoint_interval);
    let from = u64::from(i) * every;
    (from, (from + every).min(summary.total_steps))
}

fn ledger_active(node: &Node, who: &Signer) -> u128 {
    node.bond(&who.public_key().0).expect("the account is bonded").active
}
