//! Proof of Drilling on a live dev chain: Alice registers as a task publisher, root (Alice, through
//! sudo) approves her, she publishes a matrix-chain task for two executors; the chain draws Alice and
//! Bob (the only bonded trainers, both registered drillers), both compute it with the reference, commit and reveal; they agree,
//! are credited D, and `ergon_hashrate` shows their measured throughput.

use std::time::Duration;

use ergon_client::keys::Signer;
use ergon_drill::MatmulChain;
use ergon_integration_tests::{chain::calls, dev_pair, wait_for, Node, Ports};
use ergon_protocol::commitments::drill_result;
use serde_json::json;

use ergon_protocol::units::ERG;

#[test]
fn a_published_task_is_drilled_agreed_credited_and_its_hashrate_shown() {
    let dir = tempfile::tempdir().expect("temp dir");
    let args: Vec<String> = ["--dev", "--tmp"].iter().map(|s| s.to_string()).collect();
    let node = Node::start("dev", Ports::free(), &args, dir.path());
    node.wait_finalized(1, Duration::from_secs(180));
    let timeout = Duration::from_secs(120);
    let (alice, bob) = (dev_pair("//Alice"), dev_pair("//Bob"));
    node.send(calls::bond(2_000 * ERG), &bob, timeout);
    // Both run the driller role and declare 1 000 ut/hour: tasks up to 41.7 ut, 51.7 ERG of
    // collateral each.
    let capacity = Some(1_000 * 1_000_000);
    node.send(calls::set_driller(capacity), &alice, timeout);
    node.send(calls::set_driller(capacity), &bob, timeout);

    node.send(calls::register_publisher(), &alice, timeout);
    node.send(calls::sudo_approve_publisher(&alice.public_key().0), &alice, timeout);
    let chain = MatmulChain { seed: [0x42; 32], dim: 128, length: 4 };
    node.send(calls::publish_matmul_task(&chain, 2), &alice, timeout);

    // Executors are drawn once the VRF outputs of the 16 blocks after the publication are in the
    // chain's randomness (about 96 s): both bonded trainers.
    let tasks_of = |who: &Signer| {
        node.call("ergon_drillingTasksOf", json!([who.public_key().to_account_id().to_string()]))
            .expect("ergon_drillingTasksOf")
    };
    let task = wait_for("Alice to be drawn", Duration::from_secs(600), || {
        tasks_of(&alice).as_array()?.first()?.as_u64()
    });
    assert_eq!(tasks_of(&bob), json!([task]), "Bob is the other executor");

    // Both run the reference and commit, then reveal.
    let result = chain.run_reference();
    for (who, salt) in [(&alice, [1u8; 32]), (&bob, [2u8; 32])] {
        let commitment = drill_result(task, &who.public_key().0, &result, &salt);
        node.send(calls::commit_result(task, commitment), who, timeout);
    }
    for (who, salt) in [(&alice, [1u8; 32]), (&bob, [2u8; 32])] {
        node.send(calls::reveal_result(task, result, salt), who, timeout);
    }

    // Agreement: both credited the task's difficulty, and their hashrate is on record.
    let difficulty = chain.difficulty_micro_ut();
    for who in [&alice, &bob] {
        let account = who.public_key().to_account_id().to_string();
        let rate = wait_for("the hashrate record", timeout, || {
            let r = node.call("ergon_hashrate", json!([account])).ok()?;
            (!r.is_null()).then_some(r)
        });
        assert_eq!(rate["tasks"], 1, "{rate}");
        assert_eq!(rate["difficultyMicroUt"], difficulty.to_string(), "{rate}");
        let busy_ms = rate["busyMs"].as_u64().expect("busyMs");
        assert!(busy_ms >= 1, "{rate}");
        let per_hour: u128 = rate["microUtPerHour"].as_str().unwrap().parse().unwrap();
        assert_eq!(per_hour, difficulty * 3_600_000 / busy_ms as u128, "{rate}");
        let ecp = node.call("ergon_ecp", json!([account])).expect("ergon_ecp");
        let drilling: u128 = ecp["drilling"].as_str().unwrap().parse().unwrap();
        assert!(drilling >= difficulty, "D credited: {ecp}");
    }
    assert!(tasks_of(&alice).as_array().is_some_and(|a| a.is_empty()), "nothing left to do");
    let top = node.call("ergon_hashrates", json!([10])).expect("ergon_hashrates");
    assert_eq!(top.as_array().map(|a| a.len()), Some(2), "{top}");
}
