//! The trainer daemon on a live dev chain, with no script in the loop: Bob runs `ergon-worker run`
//! as a trainer, Charlie and Dave as verifiers; Alice, a user, posts the Fashion-MNIST job with the
//! user command line (`scripts/client/ergon.mjs`), after it refused a malformed spec with the
//! runtime's own error and nothing signed. Bob's daemon prices the job, bids, wins it when the bid
//! window closes, trains it, serves and commits the bundle; the verifiers' daemons replay the
//! segments they are drawn for, commit and reveal; the job settles, and the CLI watches it and
//! fetches the model, checked against the committed root.
//!
//! Meanwhile Alice publishes a drilling task for two executors: Charlie's and Dave's daemons, also
//! drillers, compute it, commit and reveal, and both are credited.
//!
//! On the way, both crashes a daemon must survive: Bob's daemon is killed with SIGKILL in the
//! middle of the training and restarted (it resumes from its last checkpoint), and Charlie's is
//! killed between its commitment and its reveal and restarted (it reveals from its store instead of
//! being slashed as silent); and the node itself is restarted under the running daemons, which
//! reconnect. Nothing is submitted twice across the restarts.
//!
//! The draw waits for the VRF outputs of the 16 blocks after the commitment (about 96 s).

use std::{
    path::Path,
    time::{Duration, Instant},
};

use ergon_drill::MatmulChain;
use ergon_integration_tests::{
    chain::calls, check, client_script, dev_pair, job_view, market_daemons, post_job_as_alice,
    user_cli, wait_for, wait_for_daemons, Node, Ports, STALL_MID_TRAINING,
};
use serde_json::{json, Value};

use ergon_protocol::units::ERG;

/// A JSON record of a daemon's store, if written.
fn record(dir: &Path, path: &str) -> Option<Value> {
    serde_json::from_slice(&std::fs::read(dir.join(path)).ok()?).ok()
}

#[test]
fn daemons_take_a_job_from_post_to_settlement_across_crashes() {
    let dir = tempfile::tempdir().expect("temp dir");
    // A base path, not --tmp: the node is restarted under the running daemons below.
    let chain_dir = dir.path().join("chain").to_string_lossy().to_string();
    let args: Vec<String> =
        ["--dev", "--base-path", &chain_dir].iter().map(|s| s.to_string()).collect();
    let mut node = Node::start("dev", Ports::free(), &args, dir.path());
    node.wait_finalized(1, Duration::from_secs(180));

    // Bob's first training hangs at step 90, where the test kills it (below).
    let [mut bob, mut charlie, mut dave] = market_daemons(&node, dir.path(), &STALL_MID_TRAINING);

    // Alice publishes a matrix-chain task for two executors (the registered drillers).
    let alice_pair = dev_pair("//Alice");
    let timeout = Duration::from_secs(120);
    node.send(calls::register_publisher(), &alice_pair, timeout);
    node.send(calls::sudo_approve_publisher(&alice_pair.public_key().0), &alice_pair, timeout);
    let chain = MatmulChain { seed: [0x42; 32], dim: 128, length: 4 };
    node.send(calls::publish_matmul_task(&chain, 2), &alice_pair, timeout);

    // A malformed spec (its second layer does not take the first one's output) is refused by the
    // CLI before anything is signed, with the runtime's error and the reason in words.
    let spec_path =
        ergon_integration_tests::repo_dir().join("worker/examples/fashion-mnist-mlp.json");
    let mut bad: Value =
        serde_json::from_slice(&std::fs::read(&spec_path).expect("example spec")).unwrap();
    bad["model"]["layers"][1]["in_features"] = json!(785);
    let bad_path = dir.path().join("bad-spec.json");
    std::fs::write(&bad_path, bad.to_string()).unwrap();
    let alice = dev_pair("//Alice").public_key().0;
    let before = node.account(&alice);
    let (ok, out) =
        user_cli(node.ports.rpc, &["post-job", &bad_path.to_string_lossy(), "--budget", "100"]);
    assert!(
        !ok && out.contains("jobMarket.LayerShapeMismatch") && out.contains("layer 1"),
        "{out}"
    );
    let after = node.account(&alice);
    assert_eq!(
        (after.nonce, after.reserved),
        (before.nonce, before.reserved),
        "nothing signed or held"
    );

    // Alice posts the job: 100 ERG budget, bids for 20 blocks, 400 blocks to deliver.
    let job = post_job_as_alice(node.ports.rpc, &spec_path);
    // The user's list shows it among Alice's jobs (open or, if the window closed, assigned).
    let (ok, out) = user_cli(node.ports.rpc, &["list-jobs"]);
    let alice_address = dev_pair("//Alice").public_key().to_account_id().to_string();
    assert!(ok && out.contains(&format!("jobs of {alice_address}: {job}")), "{out}");
    // Where the post → settled latency goes (printed with --nocapture).
    let posted = Instant::now();
    let mark = |what: &str| {
        eprintln!("[daemon test] {what}: {:.0} s after posting", posted.elapsed().as_secs_f64())
    };

    // Bob's daemon bids; the chain assigns the job to the cheapest bid when the window closes.
    let five_minutes = Duration::from_secs(300);
    wait_for_daemons("Bob's daemon to be assigned the job", five_minutes, &[&bob], || {
        let view = job_view(&node, job);
        (view["state"]["status"] == "assigned").then_some(())
    });

    mark("assigned (bid window closed)");

    // Mid-training: a few checkpoints written, then SIGKILL and a restart.
    let progress = dir.path().join(format!("bob/bundles/job-{job}/progress.json"));
    wait_for_daemons("Bob's training to write checkpoints", five_minutes, &[&bob], || {
        let p: Value = serde_json::from_slice(&std::fs::read(&progress).ok()?).ok()?;
        (p["checkpoints"].as_array()?.len() >= 3).then_some(())
    });
    bob.kill();
    let killed_at = serde_json::from_slice::<Value>(&std::fs::read(&progress).expect("journal"))
        .expect("journal parses")["checkpoints"]
        .as_array()
        .map(|c| c.len())
        .unwrap_or_default();
    bob.restart();

    // The node restarts under the running daemons (Bob resumes training and wants to commit while
    // it is down): they reconnect, and nothing is sent twice (counted below).
    let (_, before_restart) = node.finalized().expect("finalized block");
    node.restart();
    node.wait_finalized(before_restart + 2, Duration::from_secs(180));

    // The bundle is committed: the training resumed rather than starting again.
    wait_for_daemons("Bob's commitment", Duration::from_secs(600), &[&bob], || {
        (job_view(&node, job)["state"]["status"] == "verifying").then_some(())
    });
    mark("bundle committed (after a daemon and a node restart)");
    let bob_log = bob.log();
    check(
        bob_log.matches("resumes from the last checkpoint").count() >= 2,
        "the restarted daemon trains again",
        &[&bob],
    );
    check(killed_at >= 3, "killed after three checkpoints", &[&bob]);

    // Charlie's daemon is killed once its commitment is in a block and before it reveals.
    let vote_file = &format!("charlie/store/votes/{job}-0.json");
    let deadline = Instant::now() + Duration::from_secs(900);
    loop {
        if let Some(v) = record(dir.path(), vote_file) {
            if v["committed"] == true {
                check(v["revealed"] == false, "killed before the reveal", &[&charlie]);
                charlie.kill();
                break;
            }
        }
        check(Instant::now() < deadline, "Charlie's commitment in time", &[&bob, &charlie, &dave]);
        std::thread::sleep(Duration::from_millis(100));
    }
    mark("Charlie committed (killed)");
    std::thread::sleep(Duration::from_secs(2));
    charlie.restart();

    let all = [&bob, &charlie, &dave];
    let done = wait_for_daemons("the job to settle", Duration::from_secs(900), &all, || {
        let view = job_view(&node, job);
        let status = view["state"]["status"].as_str()?.to_string();
        (status == "completed" || status == "failed").then_some(view)
    });
    mark("settled");
    check(done["state"]["status"] == "completed", &format!("the job completes: {done}"), &all);

    // Charlie revealed after its restart (no silent slash: its bond is whole), and every chain
    // action was sent once.
    // (The daemon records its reveal once the block holding it is seen, which may be after the
    // job settles in that very block: wait for the record, do not race it.)
    wait_for_daemons("Charlie's reveal recorded", Duration::from_secs(60), &[&charlie], || {
        record(dir.path(), vote_file).filter(|v| v["revealed"] == true)
    });
    let ledger = node.bond(&dev_pair("//Charlie").public_key().0).expect("Charlie is bonded");
    assert_eq!(ledger.active, 2_000 * ERG, "Charlie was not slashed");
    let (bob_log, charlie_log) = (bob.log(), charlie.log());
    assert_eq!(bob_log.matches("bid: in a block").count(), 1, "one bid");
    assert_eq!(bob_log.matches("bundle commitment: in a block").count(), 1, "one commitment");
    assert_eq!(charlie_log.matches("verdict commitment: in a block").count(), 1, "one commitment");
    assert_eq!(charlie_log.matches("verdict reveal: in a block").count(), 1, "one reveal");

    // The challenge is over: Bob prunes its bundle to the manifest and the final checkpoint, the
    // model its owner fetches below (from what is left).
    wait_for_daemons("Bob to prune the bundle", Duration::from_secs(120), &[&bob], || {
        bob.log().contains("its bundle is pruned").then_some(())
    });
    let bundle_dir = dir.path().join(format!("bob/bundles/job-{job}"));
    let kept = std::fs::read_dir(&bundle_dir)
        .expect("Bob's bundle directory")
        .filter(|e| e.as_ref().is_ok_and(|e| e.file_name().to_string_lossy().starts_with("ckpt-")))
        .count();
    check(kept == 1, &format!("Bob keeps one checkpoint of the bundle, not {kept}"), &[&bob]);

    // The user's view: the CLI sees the settled job and fetches the model (only its manifest and
    // final checkpoint), checked against the committed root.
    let (ok, out) = user_cli(node.ports.rpc, &["watch-job", &job.to_string()]);
    assert!(ok && out.contains("completed"), "{out}");
    // Every ergon_* RPC through polkadot.js decodes to what the node sent, the job included as
    // it was verifying (the last block before it settled: a bundle and a round of votes).
    let (ok, out) =
        client_script("test/rpc-types.mjs", node.ports.rpc, &["--job", &job.to_string()]);
    assert!(ok && out.contains(": verifying, round") && out.contains("checked"), "{out}");
    let model_dir = dir.path().join("model");
    let (ok, out) = user_cli(
        node.ports.rpc,
        &["fetch-model", &job.to_string(), "--out", &model_dir.to_string_lossy()],
    );
    assert!(ok && out.contains("matches the commitment") && out.contains("accuracy"), "{out}");
    let checkpoints = std::fs::read_dir(&model_dir)
        .expect("model dir")
        .filter(|e| e.as_ref().is_ok_and(|e| e.file_name().to_string_lossy().starts_with("ckpt-")))
        .count();
    assert_eq!(checkpoints, 1, "only the final checkpoint is downloaded");

    // The drillers computed the task, agreed and were credited D.
    for who in ["//Charlie", "//Dave"] {
        let account = dev_pair(who).public_key().to_account_id().to_string();
        let rate = wait_for(&format!("{who}'s drilling record"), Duration::from_secs(600), || {
            let r = node.call("ergon_hashrate", json!([account])).ok()?;
            (!r.is_null()).then_some(r)
        });
        assert_eq!(rate["tasks"], 1, "{rate}");
        assert_eq!(rate["difficultyMicroUt"], chain.difficulty_micro_ut().to_string(), "{rate}");
    }
    // Their records decode through polkadot.js too (ergon_hashrate, ergon_hashrates).
    let (ok, out) = client_script("test/rpc-types.mjs", node.ports.rpc, &[]);
    assert!(
        ok && out.contains("hashrate a value") && !out.contains("hashrates(): 0 items"),
        "{out}"
    );

    // An operator turns Dave's verifier role off: SIGTERM stops the daemon cleanly, and at its
    // next start it leaves the verifier pool (left in it, it would be drawn and slashed as silent).
    check(dave.stop(), "Dave's daemon stops cleanly on SIGTERM", &[&dave]);
    dave.restart_with_roles("driller");
    wait_for_daemons("Dave's daemon to leave the pool", Duration::from_secs(180), &[&dave], || {
        dave.log().contains("leaving the verifier pool: in a block").then_some(())
    });
    assert!(!node.in_verifier_pool(&dev_pair("//Dave").public_key().0), "Dave left the pool");

    // Bob was credited the training work.
    let ecp = node
        .call("ergon_ecp", json!([dev_pair("//Bob").public_key().to_account_id().to_string()]))
        .expect("ergon_ecp");
    let training: u128 = ecp["training"].as_str().and_then(|s| s.parse().ok()).unwrap_or_default();
    assert!(training > 0, "Bob's T grew: {ecp}");
}
