//! A spec that diverges, on a live dev chain with daemons only. Alice posts a job whose inputs
//! are so large that plain SGD blows the weights up within a few dozen steps: nobody can deliver a
//! trained model. Bob's daemon trains it anyway, finds the divergence, commits the checkpoints
//! before it and says where; Charlie's and Dave's daemons replay the tail and confirm; the chain
//! pays Bob for the steps he trained and refunds Alice the rest. Before this outcome existed, the
//! same spec cost its trainer a slash at the deadline: an owner could grief trainers for the price
//! of a posting fee (docs/threat-model.md).
//!
//! The draw waits for the VRF outputs of the 16 blocks after the commitment (about 96 s).

use std::{path::Path, process::Command, time::Duration};

use ergon_integration_tests::{
    check, dev_pair, job_view, market_daemons, post_job_as_alice, user_cli, wait_for_daemons,
    worker_binary, Node, Ports,
};
use serde_json::{json, Value};

use ergon_protocol::units::ERG;

/// A 3-class CSV task whose features are scaled by 1 000: SGD at 0.1 diverges on it. 100 steps, a
/// checkpoint every 3 (the chain wants at least 30 segments).
fn diverging_spec(dir: &Path) -> Value {
    let mut text = String::new();
    for i in 0..150u32 {
        let class = i % 3;
        let f = |k: u32| (((i * 7 + k * 13) % 17) as f32 / 17.0 - 0.5) * 1_000.0;
        text.push_str(&format!(
            "{class},{},{},{},{}\n",
            f(0) + class as f32 * 1_000.0,
            f(1),
            f(2),
            f(3)
        ));
    }
    let data = dir.join("huge-features.csv");
    std::fs::write(&data, text).unwrap();
    // The content root, as a spec author computes it.
    let out = Command::new(worker_binary()).arg("content-root").arg(&data).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let root = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let dataset = json!({
        "format": { "type": "Csv", "features": 4, "classes": 3 },
        "files": [data.to_string_lossy()],
        "content_root": root,
        "samples": 150
    });
    json!({
        "model": { "layers": [
            { "type": "Linear", "in_features": 4, "out_features": 16, "bias": true },
            { "type": "ReLU" },
            { "type": "Linear", "in_features": 16, "out_features": 3, "bias": true }
        ]},
        "train": dataset,
        "validation": dataset,
        "optimizer": { "type": "Sgd", "lr": 0.1, "momentum": 0.9, "weight_decay": 0.0 },
        "epochs": 10,
        "batch_size": 16,
        "checkpoint_interval": 3
    })
}

#[test]
fn a_diverging_spec_settles_with_its_trainer_paid_for_the_steps_and_not_slashed() {
    let dir = tempfile::tempdir().expect("temp dir");
    let node = Node::start("dev", Ports::free(), &["--dev".into(), "--tmp".into()], dir.path());
    node.wait_finalized(1, Duration::from_secs(180));
    let [bob, charlie, dave] = market_daemons(&node, dir.path(), &[]);
    let daemons = [&bob, &charlie, &dave];

    let spec_path = dir.path().join("diverging.json");
    std::fs::write(&spec_path, diverging_spec(dir.path()).to_string()).unwrap();
    let alice = dev_pair("//Alice").public_key().0;
    let reserved_before = node.account(&alice).reserved;
    let job = post_job_as_alice(node.ports.rpc, &spec_path);

    // The agreed price, seen while the bundle is verified; then the settlement.
    let mut agreed = 0u128;
    let done = wait_for_daemons("the job to settle", Duration::from_secs(1_500), &daemons, || {
        let view = job_view(&node, job);
        let status = view["state"]["status"].as_str()?.to_string();
        if status == "verifying" {
            agreed = view["state"]["price"].as_str().and_then(|p| p.parse().ok()).unwrap_or(0);
        }
        (status == "completed" || status == "failed").then_some(view)
    });
    check(done["state"]["status"] == "completed", &format!("settled: {done}"), &daemons);
    let step = done["state"]["bundle"]["divergedAt"].as_u64();
    check(step.is_some_and(|s| s < 100), &format!("the bundle says it diverged: {done}"), &daemons);
    check(
        bob.log().contains("the spec diverged: committing the checkpoints before it"),
        "Bob's daemon found the divergence",
        &daemons,
    );

    // Bob: paid for the steps trained (the agreed price × step / 100 steps, less the 10 % burn),
    // not slashed (its whole bond active).
    let step = step.unwrap_or_default() as u128;
    let paid: u128 = done["state"]["price"].as_str().and_then(|p| p.parse().ok()).unwrap_or(0);
    let earned = agreed * step / 100;
    check(
        agreed > 0 && paid == earned - earned / 10,
        &format!("Bob was paid {paid} of {agreed} for {step} of 100 steps: {done}"),
        &daemons,
    );
    let ledger = node.bond(&dev_pair("//Bob").public_key().0).expect("Bob is bonded");
    assert_eq!(ledger.active, 2_000 * ERG, "Bob was not slashed");
    // Alice: nothing left held.
    let reserved_after = node.account(&alice).reserved;
    assert_eq!(reserved_after, reserved_before, "the escrow is settled");

    // The user's view: the CLI says the spec diverged, and there is no model to fetch.
    let (ok, out) = user_cli(node.ports.rpc, &["watch-job", &job.to_string()]);
    assert!(ok && out.contains("diverged at step"), "{out}");
    let (ok, out) = user_cli(node.ports.rpc, &["fetch-model", &job.to_string()]);
    assert!(!ok && out.contains("diverged"), "{out}");
}
