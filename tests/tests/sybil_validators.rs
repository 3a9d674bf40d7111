//! Sybil seats that never vote (issue 34, item 4, live test (c)) on the 4-validator network.
//!
//! The attack: bond the minimum under two more accounts, do the least work a seat takes, register
//! session keys, take seats and never run a node. With one GRANDPA vote per seat, 4 of 6 votes are
//! not more than two thirds and finality halts for good (the set cannot change without it). Here
//! the two seats hold from genesis: `--chain local` with Eve and Ferdie added as genesis validators
//! (1 000 ERG bonded, ECP 1 ut each, dev session keys) whose nodes are never started. Votes weigh by
//! bond, so the four running validators (10 000 ERG each) finalize on their own; the first judged
//! session (session 1: the genesis session is not judged) the sybils sit out without a block or a
//! heartbeat (pallet-im-online) costs each a slash and its seat.

use std::{path::Path, process::Command, time::Duration};

use ergon_integration_tests::{
    network::{assert_same_finalized_chain, start_validators_on},
    node_binary, wait_for, Node,
};
use serde_json::{json, Value};

/// One ERG in plancks.
use ergon_protocol::units::ERG;

/// A dev key's public key and SS58 address, as `ergon-node key inspect` gives them.
fn inspect(scheme: &str, suri: &str) -> ([u8; 32], String) {
    let out = Command::new(node_binary())
        .args(["key", "inspect", "--scheme", scheme, "--output-type", "json", suri])
        .output()
        .expect("ergon-node key inspect runs");
    assert!(out.status.success(), "key inspect {suri}: {}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).expect("key inspect prints JSON");
    let hex = v["publicKey"].as_str().expect("publicKey").trim_start_matches("0x");
    let mut public = [0u8; 32];
    for (i, byte) in public.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).expect("hex");
    }
    (public, v["ss58Address"].as_str().expect("ss58Address").to_string())
}

/// `--chain local`'s spec with `sybils` (dev names) added as genesis validators that bonded 1 000
/// ERG and have 1 ut of ECP, written to `dir/sybil-spec.json`; returns its path.
fn spec_with_sybils(dir: &Path, sybils: &[&str]) -> String {
    let out = Command::new(node_binary())
        .args(["build-spec", "--chain", "local"])
        .output()
        .expect("ergon-node build-spec runs");
    assert!(out.status.success(), "build-spec: {}", String::from_utf8_lossy(&out.stderr));
    let mut spec: Value = serde_json::from_slice(&out.stdout).expect("the spec is JSON");
    let patch = &mut spec["genesis"]["runtimeGenesis"]["patch"];
    for name in sybils {
        let (_, account) = inspect("sr25519", &format!("//{name}"));
        let (_, grandpa) = inspect("ed25519", &format!("//{name}"));
        let keys =
            json!({ "babe": account, "grandpa": grandpa, "ergon": account, "im_online": account });
        patch["session"]["keys"]
            .as_array_mut()
            .expect("session keys")
            .push(json!([account, account, keys]));
        patch["trainerStaking"]["stakers"]
            .as_array_mut()
            .expect("stakers")
            .push(json!([account, 1_000 * ERG]));
        patch["computePower"]["trainers"]
            .as_array_mut()
            .expect("trainers")
            .push(json!([account, 1_000_000, 1_000_000]));
    }
    let path = dir.join("sybil-spec.json");
    std::fs::write(&path, serde_json::to_vec(&spec).expect("spec serializes"))
        .expect("spec written");
    path.display().to_string()
}

#[test]
fn sybil_seats_that_never_vote_neither_halt_finality_nor_keep_their_seats() {
    let dir = tempfile::tempdir().expect("temp dir");
    let spec = spec_with_sybils(dir.path(), &["Eve", "Ferdie"]);
    let nodes = start_validators_on(dir.path(), &spec);
    let all: Vec<&Node> = nodes.iter().collect();
    let alice = &nodes[0];
    let (eve, _) = inspect("sr25519", "//Eve");
    let (ferdie, _) = inspect("sr25519", "//Ferdie");
    let (eve_grandpa, _) = inspect("ed25519", "//Eve");

    // Six seats from genesis, two of them silent: the four honest votes finalize anyway. (Read at
    // genesis: by now session 0 may have ended, and the sybils been suspended.)
    let validators = alice.session_validators_at(0);
    assert_eq!(validators.len(), 6, "six genesis validators");
    assert!(validators.contains(&eve) && validators.contains(&ferdie));
    let grandpa = alice.grandpa_authorities_at(0);
    assert_eq!(grandpa.len(), 6, "{grandpa:?}");
    let total: u64 = grandpa.iter().map(|(_, w)| w).sum();
    let eve_weight = grandpa.iter().find(|(k, _)| *k == eve_grandpa).map(|(_, w)| *w);
    assert_eq!(eve_weight, Some(1_000), "a sybil's vote weighs its bond: {grandpa:?}");
    assert_eq!(total, 42_000, "four 10 000-ERG validators and two 1 000-ERG sybils");
    assert_same_finalized_chain(&all, 5);
    println!("finality with two of six seats silent: #5 finalized (votes 40 000 of 42 000)");

    // The genesis session is not judged (validators come up one by one); they sit session 1 out:
    // slashed and suspended at its end, out of the set from session 3.
    wait_for("the sybils to lose their seats", Duration::from_secs(720), || {
        let validators = alice.session_validators();
        (!validators.contains(&eve) && !validators.contains(&ferdie)).then_some(())
    });
    let validators = alice.session_validators();
    assert_eq!(validators.len(), 4, "the four running validators keep their seats");
    for sybil in [eve, ferdie] {
        let bond = alice.bond(&sybil).expect("the sybil's bond").active;
        assert!(bond < 1_000 * ERG, "an unresponsive session is slashed: {bond}");
        println!("a sybil's bond after its silent session: {:.2} ERG", bond as f64 / ERG as f64);
    }
    for honest in &validators {
        let bond = alice.bond(honest).expect("a validator's bond").active;
        assert_eq!(bond, 10_000 * ERG, "no running validator is reported unresponsive");
    }

    // GRANDPA's set follows, and finality goes on past the change.
    let keys = wait_for("GRANDPA's set to drop the sybils", Duration::from_secs(120), || {
        let set = alice.grandpa_authorities();
        (set.len() == 4).then_some(set)
    });
    assert!(keys.iter().all(|(_, w)| *w == 10_000), "{keys:?}");
    let (_, head) = alice.finalized().expect("alice answers");
    assert_same_finalized_chain(&all, head + 3);
}
