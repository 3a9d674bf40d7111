//! The 4-validator network on loopback that `scripts/devnet.sh` starts, for the tests: `--chain
//! local` with its four genesis validators (Alice, Bob, Charlie, Dave, bonded at genesis), each node
//! booting from Alice's, and a trainer daemon beside each node, talking to its own node.

use std::{path::Path, time::Duration};

use crate::{daemon_args, wait_for, Daemon, Node, Ports};

/// The genesis validators of `--chain local`, in order (node `i` is validator `VALIDATORS[i]`).
pub const VALIDATORS: [&str; 4] = ["alice", "bob", "charlie", "dave"];

/// libp2p peer ID of the ed25519 node key 0x00…01, given to Alice so the others can boot from her.
const ALICE_PEER_ID: &str = "12D3KooWEyoppNCUx8Yx66oV9fJnriXwCcXwDDUA2kj6vnc6iDEp";

/// The dev key of validator `name` (`alice` → `//Alice`).
pub fn dev_key(name: &str) -> String {
    let mut chars = name.chars();
    let first = chars.next().map(|c| c.to_ascii_uppercase().to_string()).unwrap_or_default();
    format!("//{first}{}", chars.as_str())
}

/// Starts the four validators: state under `dir/<name>`, logs in `dir`, fixed node keys.
pub fn start_validators(dir: &Path) -> Vec<Node> {
    start_validators_on(dir, "local")
}

/// [`start_validators`] on `chain`: `local` or the path of a chain spec derived from it (with the
/// same four validators among its genesis authorities).
pub fn start_validators_on(dir: &Path, chain: &str) -> Vec<Node> {
    let alice_ports = Ports::free();
    VALIDATORS
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let ports = if i == 0 { alice_ports } else { Ports::free() };
            let mut args: Vec<String> = vec![
                "--chain".into(),
                chain.into(),
                format!("--{name}"),
                "--validator".into(),
                "--base-path".into(),
                dir.join(name).display().to_string(),
                "--node-key".into(),
                format!("{:064x}", i + 1),
            ];
            if i != 0 {
                args.push("--bootnodes".into());
                args.push(format!("/ip4/127.0.0.1/tcp/{}/p2p/{ALICE_PEER_ID}", alice_ports.p2p));
            }
            Node::start(name, ports, &args, dir)
        })
        .collect()
}

/// Waits until every node in `nodes` has finalized `target`, then checks they agree on its hash.
pub fn assert_same_finalized_chain(nodes: &[&Node], target: u32) {
    for node in nodes {
        node.wait_finalized(target, Duration::from_secs(240));
    }
    let hashes: Vec<_> =
        nodes.iter().map(|n| n.block_hash(target).expect("finalized block has a hash")).collect();
    assert!(
        hashes.windows(2).all(|w| w[0] == w[1]),
        "nodes disagree on finalized block #{target}: {hashes:?}"
    );
}

/// Starts the daemons of the validators beside their nodes (`nodes` in [`VALIDATORS`] order), each
/// with `roles`, its data under `dir/<name>-worker` and the arguments `extra` gives its name, and
/// waits until the verifiers among them are in the pool: a draw only takes verifiers that joined
/// before its randomness began, so jobs should be posted after this.
pub fn validator_daemons(
    nodes: &[Node],
    roles: &str,
    dir: &Path,
    extra: &[(&str, &[&str])],
) -> Vec<Daemon> {
    let daemons: Vec<Daemon> = VALIDATORS
        .iter()
        .zip(nodes)
        .map(|(name, node)| {
            let worker = format!("{name}-worker");
            let mut args = daemon_args(node, &dev_key(name), roles, dir, &worker);
            let more = extra.iter().filter(|(who, _)| who == name).flat_map(|(_, a)| a.iter());
            args.extend(more.map(|a| a.to_string()));
            Daemon::start(&worker, &args, dir)
        })
        .collect();
    if roles.split(',').any(|r| r == "verifier") {
        for daemon in &daemons {
            wait_for("the validators' daemons to join the pool", Duration::from_secs(240), || {
                daemon.log().contains("joining the verifier pool: in a block").then_some(())
            });
        }
    }
    daemons
}
