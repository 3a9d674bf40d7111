//! Faults on a live 4-validator network (`--chain local`, what `scripts/devnet.sh` starts) with a
//! trainer daemon beside each validator, and the market's promises kept through them. The
//! scenarios run at once on one network, so that they share its waits for fresh randomness:
//!
//! - job A, trained by Bob: Bob's daemon is killed (SIGKILL) in the middle of the training and
//!   restarted, and Dave's validator — the largest BABE weight — is stopped and restarted while the
//!   job is in flight. A completes; Bob is paid.
//! - job B, won by Eve, a cheating trainer (the attack suite's `wronglearningrate` forger, behind the
//!   test build's `--forge`): the verifiers fail it, the dispute upholds the fail, Eve loses her
//!   collateral, and the owner is refunded in full (Eve's collateral pays the verifier fees back).
//! - job C, won by Ferdie, whose bundle URL nobody can reach: the validators' offchain workers
//!   attest it unavailable, Ferdie loses his collateral and his bid deposit, the owner gets the
//!   escrow back and the deposit.
//! - job D, whose budget is below every trainer's asking price: nobody bids, it ends `NoBids` and
//!   the escrow goes back.
//! - a malformed spec sent straight to the chain (past the CLI's check): refused by the runtime,
//!   no job, nothing held but the transaction fee paid.
//! - the load, meanwhile: 200 jobs posted in one burst with the user CLI by 13 owners (16 each, an
//!   owner's cap), their budgets below every asking price. All 200 end (`NoBids`, at most
//!   `MaxTimeoutsPerBlock` a block) with their escrow back, and the chain keeps its block time
//!   (printed: jobs ended per minute, block time and extrinsics per block before and under the
//!   load, finality lag). With `ERGON_SNAPSHOT_OUT` set, the final state is written there for the
//!   runtime's `try_state` of every pallet (`runtime/src/snapshot_tests.rs`; `scripts/test.sh` runs
//!   it next).
//!
//! At the end nothing stays held: no owner has a balance on hold, no trainer an obligation. Owners
//! pick their trainer with `accept_bid` (the market's own way of choosing a bid before the window
//! closes), so every trainer daemon bids on every job and the scenarios still go where they should.
//!
//! The draws wait for the VRF outputs of the 16 blocks after the commitment (about 96 s), and job
//! B's dispute for 16 more after it opens. Its measurements print with `--nocapture`.

use std::{path::Path, time::Duration};

use ergon_integration_tests::{
    chain::calls,
    check, daemon_args, dev_pair, free_port, job_view,
    measure::{block_stats, write_snapshot},
    network::{assert_same_finalized_chain, start_validators, validator_daemons},
    played::fee,
    post_job_windowed, user_cli_json, wait_for, wait_for_daemons, worker_has_forgers, Daemon, Node,
    STALL_MID_TRAINING,
};
use serde_json::{json, Value};

use ergon_protocol::units::ERG;
/// The posting fee (burnt, never refunded).
const POSTING_FEE: u128 = ERG;
/// A bound on the transaction fees an owner pays here (a few calls at ~10⁻³ ERG each).
const TX_FEES: u128 = ERG / 10;
/// A bound on the slot rent an owner burns here: 1 ERG a day to the deadline, which is at most
/// 1 000 blocks out, of the fast runtime's 57 600 blocks a day (also burnt, never refunded).
const SLOT_RENT: u128 = ERG / 50;
/// The runtime's bid deposit: a trainer whose bundle is found unavailable forfeits it to the owner.
const BID_DEPOSIT: u128 = 10 * ERG;

fn account(who: &str) -> [u8; 32] {
    dev_pair(who).public_key().0
}

/// Free plus held balance of `who`.
fn total(node: &Node, who: &str) -> u128 {
    let a = node.account(&account(who));
    a.free + a.reserved
}

/// Waits for `trainer`'s bid on `job`, then `owner` accepts it; returns the price.
fn accept(node: &Node, job: u64, owner: &str, trainer: &str, daemons: &[&Daemon]) -> u128 {
    let who = account(trainer);
    let bid = format!("{trainer}'s bid on job {job}");
    let price = wait_for_daemons(&bid, Duration::from_secs(120), daemons, || {
        node.bids(job).iter().find(|(t, _)| *t == who).map(|(_, p)| *p)
    });
    node.send(calls::accept_bid(job, &who), &dev_pair(owner), Duration::from_secs(120));
    let view = job_view(node, job);
    check(view["state"]["status"] == "assigned", &format!("job {job} assigned: {view}"), daemons);
    price
}

/// Waits until `job` is completed or failed; returns its view.
fn settled(node: &Node, job: u64, timeout: Duration, daemons: &[&Daemon]) -> Value {
    wait_for_daemons(&format!("job {job} to settle"), timeout, daemons, || {
        let view = job_view(node, job);
        matches!(view["state"]["status"].as_str(), Some("completed" | "failed")).then_some(view)
    })
}

/// Jobs in the load's burst, and owners posting them (an owner holds at most 16 unfinished jobs).
const BURST: u32 = 200;
const PER_OWNER: u32 = 16;

/// The load's owners: fresh accounts funded by `//Ferdie//stash` (no daemon signs with it).
fn load_owners() -> Vec<String> {
    (0..BURST.div_ceil(PER_OWNER)).map(|i| format!("//Load{i}")).collect()
}

/// Posts the burst: every load owner runs the user CLI at once, each sending its jobs with
/// consecutive nonces (`post-job --count`), budgets of 5 ERG (below every trainer's asking price).
/// Returns the job ids.
fn burst(node: &Node, spec_path: &Path) -> Vec<u64> {
    let funder = dev_pair("//Ferdie//stash");
    let transfers: Vec<_> = load_owners()
        .iter()
        .map(|o| (calls::transfer_keep_alive(&account(o), 1_000 * ERG), &funder))
        .collect();
    node.send_all(&transfers, Duration::from_secs(180));
    let spec = spec_path.to_string_lossy();
    let rpc = node.ports.rpc;
    let ids: Vec<u64> = std::thread::scope(|scope| {
        let posts: Vec<_> = load_owners()
            .into_iter()
            .enumerate()
            .map(|(i, owner)| {
                let count = PER_OWNER.min(BURST - i as u32 * PER_OWNER).to_string();
                let spec = spec.clone();
                scope.spawn(move || {
                    let args = ["post-job", &spec, "--key", &owner, "--budget", "5"];
                    let more = ["--bid-window", "20", "--deadline", "400", "--count", &count];
                    user_cli_json(rpc, &[&args[..], &more[..]].concat())
                })
            })
            .collect();
        posts
            .into_iter()
            .flat_map(|p| {
                let posted = p.join().expect("the CLI thread");
                let ids = posted["jobs"].as_array().cloned().unwrap_or_default();
                ids.into_iter().map(move |id| id.as_u64().expect("a job id"))
            })
            .collect()
    });
    assert_eq!(ids.len(), BURST as usize);
    ids
}

#[test]
fn the_market_keeps_its_promises_through_faults_and_load_on_four_validators() {
    if !worker_has_forgers() {
        panic!(
            "this test needs the worker built with the attack suite: \
             cargo build --release -p ergon-worker --features attacks (scripts/test.sh does)"
        );
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let mut nodes = start_validators(dir.path());
    assert_same_finalized_chain(&nodes.iter().collect::<Vec<_>>(), 1);

    // Each validator's daemon trains and verifies (drilling is not under test: it would only take
    // CPU from the scenarios).
    // Bob's first training hangs at step 90, where the test kills it (below).
    let bob_stalls = [("bob", &STALL_MID_TRAINING[..])];
    let mut validators = validator_daemons(&nodes, "trainer,verifier", dir.path(), &bob_stalls);
    // Two trainers from outside the validator set: Eve forges her bundles; Ferdie's bundle URL
    // points at a port nothing listens on. Ferdie verifies too: B's dispute needs two seats that
    // did not vote in its first round (no round is decided by one seat), and the validators'
    // four daemons leave one once three of them have voted.
    let start = |name: &str, node: &Node, roles: &str, extra: &[String]| {
        let lower = name.to_lowercase();
        let mut args = daemon_args(node, &format!("//{name}"), roles, dir.path(), &lower);
        args.extend(extra.iter().cloned());
        Daemon::start(&lower, &args, dir.path())
    };
    let eve = start("Eve", &nodes[0], "trainer", &["--forge".into(), "wronglearningrate".into()]);
    let unreachable = format!("http://127.0.0.1:{}", free_port());
    let ferdie =
        start("Ferdie", &nodes[1], "trainer,verifier", &["--public-url".into(), unreachable]);
    wait_for("Ferdie's daemon to join the pool", Duration::from_secs(240), || {
        ferdie.log().contains("joining the verifier pool: in a block").then_some(())
    });
    for who in ["//Eve", "//Ferdie"] {
        wait_for(&format!("{who}'s daemon to bond"), Duration::from_secs(240), || {
            nodes[0].bond(&account(who)).filter(|b| b.active >= 2_000 * ERG)
        });
    }
    let node = &nodes[0];

    // A malformed spec (its second layer does not take the first one's output), sent as a
    // transaction: refused by the runtime; no job, nothing held.
    let spec_path =
        ergon_integration_tests::repo_dir().join("worker/examples/fashion-mnist-mlp.json");
    let spec_json: Value = serde_json::from_slice(&std::fs::read(&spec_path).unwrap()).unwrap();
    let mut bad = spec_json.clone();
    bad["model"]["layers"][1]["in_features"] = json!(785);
    let bad: ergon_job_spec::JobSpec = serde_json::from_value(bad).expect("still a spec");
    let sender = "//Eve//stash";
    let before = node.account(&account(sender));
    node.send(
        calls::post_job(&bad, 100 * ERG, 20, 400),
        &dev_pair(sender),
        Duration::from_secs(120),
    );
    let after = node.account(&account(sender));
    let address = dev_pair(sender).public_key().to_account_id().to_string();
    let jobs = node.call("ergon_jobsOf", json!([address])).expect("ergon_jobsOf");
    assert_eq!(jobs, json!([]), "no job for a malformed spec");
    assert_eq!(after.reserved, before.reserved, "nothing held");
    assert!(before.free - after.free < TX_FEES, "only the transaction fee was paid");

    // Four owners post the example job; D's budget is below every trainer's asking price.
    let owners = ["//Alice//stash", "//Bob//stash", "//Charlie//stash", "//Dave//stash"];
    let before: Vec<u128> = owners.iter().map(|o| total(node, o)).collect();
    // A, B and C are assigned by their owners' `accept_bid`, which a closing window must not
    // pre-empt (it assigns the earliest of equal bids): they take bids for 200 blocks; D's window
    // closes after the usual 20.
    let budgets = [100, 100, 100, 5];
    let windows = [200, 200, 200, 20];
    let jobs: Vec<u64> = owners
        .iter()
        .zip(budgets.into_iter().zip(windows))
        .map(|(o, (b, w))| post_job_windowed(node.ports.rpc, &spec_path, o, b, w, w + 400))
        .collect();
    let [a, b, c, d] = jobs[..] else { unreachable!() };
    let all: Vec<&Daemon> = validators.iter().chain([&eve, &ferdie]).collect();
    accept(node, a, owners[0], "//Bob", &all);
    let price_b = accept(node, b, owners[1], "//Eve", &all);
    let price_c = accept(node, c, owners[2], "//Ferdie", &all);

    // Bob's daemon dies mid-training (hung at step 90, three checkpoints written) and comes back:
    // it resumes.
    let progress = dir.path().join(format!("bob-worker/bundles/job-{a}/progress.json"));
    let bob = [&validators[1]];
    wait_for_daemons("Bob's training to write checkpoints", Duration::from_secs(300), &bob, || {
        let p: Value = serde_json::from_slice(&std::fs::read(&progress).ok()?).ok()?;
        (p["checkpoints"].as_array()?.len() >= 3).then_some(())
    });
    validators[1].kill();
    validators[1].restart();

    // Dave's validator goes down: the other three keep finalizing; back up, it catches up.
    nodes[3].stop();
    let (_, base) = nodes[0].finalized().expect("Alice answers");
    assert_same_finalized_chain(&nodes[..3].iter().collect::<Vec<_>>(), base + 3);
    nodes[3].restart();
    let (_, head) = nodes[0].finalized().expect("Alice answers");
    nodes[3].wait_finalized(head, Duration::from_secs(240));
    let node = &nodes[0];

    // The load: 200 jobs in one burst while A, B and C are in flight.
    let (_, before_burst) = node.finalized().expect("finalized");
    let posted_at = std::time::Instant::now();
    let load = burst(node, &spec_path);
    let first_posted = node.block_number(None).expect("best block");
    let mut lag = 0;
    let ended = wait_for("the burst's jobs to end", Duration::from_secs(900), || {
        let (_, fin) = node.finalized()?;
        lag = lag.max(node.block_number(None)?.saturating_sub(fin));
        let view = job_view(node, *load.iter().max()?);
        let last_ended = view["state"]["status"] == "failed";
        (last_ended
            && load
                .iter()
                .all(|j| matches!(job_view(node, *j)["state"]["status"].as_str(), Some("failed"))))
        .then(|| node.block_number(None))
        .flatten()
    });
    let minutes = posted_at.elapsed().as_secs_f64() / 60.0;
    for job in &load {
        let view = job_view(node, *job);
        assert_eq!(view["state"]["reason"], "NoBids", "{view}");
    }
    let baseline = block_stats(node, before_burst.saturating_sub(20).max(1), before_burst);
    let loaded = block_stats(node, first_posted.saturating_sub(5), ended);
    eprintln!(
        "[load] {BURST} jobs posted and ended in {minutes:.1} min ({:.0} jobs/min);          before: {baseline}; under load: {loaded}; finality lag at most {lag} blocks",
        BURST as f64 / minutes
    );
    // A third of the slots have a primary author: 3 slots per block expected (6 s in production,
    // 1.5 s on the fast runtime); the burst may not slow the chain by half as much again.
    let expected = node.expected_block_time().as_secs_f64();
    assert!(loaded.mean_block_time_s < 1.5 * expected, "the chain kept its block time: {loaded}");
    for owner in load_owners() {
        assert_eq!(node.account(&account(&owner)).reserved, 0, "{owner}: nothing held");
    }

    // D: no bid reached the chain, and the window closed.
    let all: Vec<&Daemon> = validators.iter().chain([&eve, &ferdie]).collect();
    let view_d = settled(node, d, Duration::from_secs(300), &all);
    assert_eq!(view_d["state"]["reason"], "NoBids", "{view_d}");
    assert!(node.bids(d).is_empty());

    let timeout = Duration::from_secs(1_500);
    let view_c = settled(node, c, timeout, &all);
    let view_a = settled(node, a, timeout, &all);
    let view_b = settled(node, b, timeout, &all);
    check(view_a["state"]["status"] == "completed", &format!("A completes: {view_a}"), &all);
    check(
        view_b["state"]["reason"] == "Rejected",
        &format!("B, forged, is rejected: {view_b}"),
        &all,
    );
    check(
        view_c["state"]["reason"] == "Unavailable",
        &format!("C, unreachable, fails availability: {view_c}"),
        &all,
    );
    check(
        validators[1].log().matches("resumes from the last checkpoint").count() >= 2,
        "Bob's restarted daemon resumed its training",
        &all,
    );

    // The funds. Eve and Ferdie each lost the collateral of their price (all of it), nothing else.
    for (who, price) in [("//Eve", price_b), ("//Ferdie", price_c)] {
        let bond = node.bond(&account(who)).expect("still bonded");
        eprintln!("[faults] {who}: price {price}, bond after {}", bond.active);
        assert_eq!(bond.active, 2_000 * ERG - price, "{who} loses its collateral");
        assert_eq!(bond.obligated, 0, "{who} holds no collateral any more");
    }
    // The owners of B, C and D lost the posting fee and transaction fees, nothing else: B's
    // verifier fees came back out of Eve's collateral; C's owner also got Ferdie's bid deposit,
    // which an unavailable bundle forfeits. Nothing is held for any owner.
    // Eve's collateral (her price) pays the fees back up to the price: B's owner also loses the
    // fees beyond it (docs/threat-model.md). B's votes: round 0's on their own segments, the
    // dispute's on the disputed ones (read from the chain's draws).
    let drawn = node.verifiers_drawn(b, 1);
    let spec: ergon_job_spec::JobSpec = serde_json::from_value(spec_json.clone()).expect("spec");
    let segments = spec.validate().expect("the example is valid").checkpoints - 1;
    let overhead = ergon_protocol::overhead::overhead_ppb(
        spec.train.samples,
        spec.epochs,
        spec.validation.samples,
    );
    let fees: u128 = drawn
        .iter()
        .filter(|(round, ..)| *round <= 1)
        .map(|(_, _, own)| fee(price_b, segments, own.len() as u128, overhead))
        .sum();
    let beyond_collateral = fees.saturating_sub(price_b) as i128;
    eprintln!("[faults] B's verification cost {fees} plancks, {beyond_collateral} beyond Eve's collateral");
    for (i, owner) in owners.iter().enumerate() {
        let now = node.account(&account(owner));
        let gained = if i == 2 { BID_DEPOSIT } else { 0 };
        let lost = (before[i] + gained) as i128 - (now.free + now.reserved) as i128;
        eprintln!("[faults] owner of job {}: lost {lost} plancks (less {gained} gained)", jobs[i]);
        assert_eq!(now.reserved, 0, "{owner} has nothing on hold");
        let uncovered = if i == 1 { beyond_collateral } else { 0 };
        if i > 0 {
            let least = POSTING_FEE as i128 + uncovered;
            assert!(
                (least..least + (TX_FEES + SLOT_RENT) as i128).contains(&lost),
                "{owner} is refunded all but the posting fee and slot rent (and {uncovered} of \
                 fees beyond the forger's collateral): lost {lost} (less {gained} gained)"
            );
        }
    }
    // No trainer holds collateral for a finished job.
    for who in ["//Alice", "//Bob", "//Charlie", "//Dave"] {
        let bond = node.bond(&account(who)).expect("bonded");
        assert_eq!(bond.obligated, 0, "{who}: no obligation left");
    }

    // The final state, for every pallet's try_state (run by scripts/test.sh next).
    match std::env::var_os("ERGON_SNAPSHOT_OUT") {
        Some(path) => {
            let pairs = write_snapshot(node, Path::new(&path));
            eprintln!("[faults] the final state ({pairs} keys) is in {}", path.to_string_lossy());
        }
        None => eprintln!("[faults] ERGON_SNAPSHOT_OUT not set: no snapshot for try_state"),
    }
}
