//! Obligation collateral on a live dev chain: an assigned trainer who unbonds everything it can and
//! walks away is still slashed its collateral (the price), and the owner is refunded.
//!
//! Before obligations (commit 89b1f7a) a missed deadline slashed a share of the *active* bond, so
//! unbonding right after assignment made the slash zero.

use std::time::Duration;

use ergon_integration_tests::{chain::calls, dev_pair, wait_for, Node, Ports};
use serde_json::json;

use ergon_protocol::units::ERG;

#[test]
fn an_assigned_trainer_who_unbonds_and_walks_away_loses_its_collateral() {
    let dir = tempfile::tempdir().expect("temp dir");
    let args: Vec<String> = ["--dev", "--tmp"].iter().map(|s| s.to_string()).collect();
    let node = Node::start("dev", Ports::free(), &args, dir.path());
    node.wait_finalized(1, Duration::from_secs(180));
    let (alice, bob) = (dev_pair("//Alice"), dev_pair("//Bob"));
    let timeout = Duration::from_secs(120);
    let ledger = || node.bond(&bob.public_key().0).expect("Bob is bonded");
    let alice_account = || node.account(&alice.public_key().0);

    node.send(calls::bond(2_000 * ERG), &bob, timeout);
    let spec: ergon_job_spec::JobSpec =
        serde_json::from_str(include_str!("../../worker/examples/fashion-mnist-mlp.json"))
            .expect("example spec parses");
    // Bidding closes 2 blocks after posting; the deadline leaves the 20 blocks of training the
    // runtime asks for, with a little slack for inclusion.
    let best = node.block_number(None).expect("best block");
    node.send(calls::post_job(&spec, 20 * ERG, 2, best + 28), &alice, timeout);
    node.send(calls::bid(0, 5 * ERG, ergon_protocol::DeviceClass::Cpu), &bob, timeout);
    node.send(calls::accept_bid(0, &bob.public_key().0), &alice, timeout);
    let job = node.call("ergon_job", json!([0])).expect("ergon_job");
    assert_eq!(job["state"]["status"], "assigned", "{job}");
    assert_eq!(ledger().obligated, 5 * ERG, "the price is frozen as collateral");

    // The attacker unbonds all it can: the whole bond is refused (collateral), everything above
    // the minimum goes through.
    node.send(calls::unbond(2_000 * ERG), &bob, timeout);
    assert_eq!(ledger().active, 2_000 * ERG, "unbonding the collateral is refused");
    node.send(calls::unbond(1_000 * ERG), &bob, timeout);
    assert_eq!(ledger().active, 1_000 * ERG);
    let alice_before = alice_account();

    let failed = wait_for("the missed deadline", Duration::from_secs(300), || {
        let job = node.call("ergon_job", json!([0])).ok()?;
        (job["state"]["status"] == "failed").then_some(job)
    });
    assert_eq!(failed["state"]["reason"], "MissedDeadline", "{failed}");
    let after = ledger();
    assert_eq!(after.active, 1_000 * ERG - 5 * ERG, "the collateral is slashed");
    assert_eq!(after.unlocking, 1_000 * ERG);
    assert_eq!((after.obligated, after.obligations), (0, 0));
    // The owner's escrow (20 ERG) is released and Bob's 10 ERG bid deposit is hers.
    let alice_after = alice_account();
    assert_eq!(alice_after.reserved, alice_before.reserved - 20 * ERG, "escrow released");
    assert!(alice_after.free >= alice_before.free + 30 * ERG, "refund and forfeited deposit");
}
