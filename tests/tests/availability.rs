//! Bundle availability on a live dev chain: Alice's offchain worker fetches the manifest and random
//! chunks of a committed bundle from its HTTP URI (range requests), checks them against the root and
//! attests; a bundle nobody serves is attested unavailable, and with Alice the only attester that is a
//! two-thirds quorum: the job fails and the trainer is slashed.

use std::{
    collections::HashMap,
    io::{BufRead, BufReader, Write},
    net::TcpListener,
    sync::{Arc, Mutex},
    time::Duration,
};

use codec::{Decode, Encode};
use ergon_bundle::{to_hex, FileCommitment, ManifestIndex, MANIFEST_FILE};
use ergon_integration_tests::{
    dev_pair,
    extrinsic::{
        accept_bid_call, bid_call, bond_call, post_job_call, staking_ledger_key,
        submit_bundle_call, StakingLedger,
    },
    free_port, wait_for, Node, Ports,
};
use serde_json::json;
use sp_core::{crypto::Ss58Codec, Pair};
use sp_crypto_hashing::{twox_128, twox_64};

const ERG: u128 = 1_000_000_000_000;
/// Pallet indices of the runtime (checked against the metadata by the dev-chain test).
const STAKING: u8 = 7;
const MARKET: u8 = 13;

/// A tiny HTTP server for the test bundle: GET of known paths, with single byte ranges; records the
/// requests it answered as (path, range header).
struct BundleServer {
    port: u16,
    requests: Arc<Mutex<Vec<(String, Option<String>)>>>,
}

impl BundleServer {
    fn start(files: HashMap<String, Vec<u8>>) -> BundleServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("address").port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let log = requests.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut reader = BufReader::new(stream.try_clone().expect("clone"));
                let mut line = String::new();
                let _ = reader.read_line(&mut line);
                let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
                let mut range = None;
                loop {
                    let mut header = String::new();
                    if reader.read_line(&mut header).unwrap_or(0) == 0 || header.trim().is_empty() {
                        break;
                    }
                    if let Some(v) = header.strip_prefix("Range:").or(header.strip_prefix("range:"))
                    {
                        range = Some(v.trim().to_string());
                    }
                }
                log.lock().unwrap().push((path.clone(), range.clone()));
                let Some(body) = files.get(&path) else {
                    let _ =
                        stream.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
                    continue;
                };
                let (status, part) = match range.as_deref().and_then(|r| r.strip_prefix("bytes=")) {
                    Some(r) => {
                        let (a, b) = r.split_once('-').expect("a-b");
                        let (a, b): (usize, usize) = (a.parse().unwrap(), b.parse().unwrap());
                        ("206 Partial Content", &body[a..=b])
                    }
                    None => ("200 OK", &body[..]),
                };
                let head = format!(
                    "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    part.len()
                );
                let _ = stream.write_all(head.as_bytes());
                let _ = stream.write_all(part);
            }
        });
        BundleServer { port, requests }
    }
}

/// A bundle of `checkpoints` checkpoints that all name one 2.5 MiB file (three chunks), as many as
/// the job has (the offchain worker checks the manifest against the job): the manifest bytes, the
/// file, the root.
fn bundle(checkpoints: u64) -> (Vec<u8>, Vec<u8>, [u8; 32]) {
    let file: Vec<u8> =
        (0..(5u32 << 19)).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    let c = FileCommitment::of(&file);
    let chunks: Vec<String> = c.chunks.iter().map(|h| format!("\"{}\"", to_hex(h))).collect();
    let entries: Vec<String> = (0..checkpoints)
        .map(|step| {
            format!(
                r#"{{"step": {step}, "file": "ckpt-00000000.safetensors", "file_sha256": "{}",
                "file_bytes": {}, "chunks": [{}], "digest": "{}"}}"#,
                to_hex(&c.sha256),
                c.bytes,
                chunks.join(","),
                to_hex(&[5; 32])
            )
        })
        .collect();
    let manifest =
        format!(r#"{{"format_version": 2, "checkpoints": [{}]}}"#, entries.join(",")).into_bytes();
    let root = ManifestIndex::parse(&manifest).expect("a valid manifest").root();
    (manifest, file, root)
}

/// `JobMarket::Attestations(job)`: (attester key, available) pairs.
fn attestations(node: &Node, job: u64) -> Vec<([u8; 32], bool)> {
    let mut key = twox_128(b"JobMarket").to_vec();
    key.extend(twox_128(b"Attestations"));
    key.extend(twox_64(&job.encode()));
    key.extend(job.encode());
    node.storage(&key).and_then(|v| Vec::decode(&mut &v[..]).ok()).unwrap_or_default()
}

/// Alice posts a job, Bob bids and is accepted, Bob commits `root` at `uri`; returns the job id.
fn committed_job(node: &Node, spec: &ergon_job_spec::JobSpec, root: [u8; 32], uri: &str) -> u64 {
    let (alice, bob) = (dev_pair("//Alice"), dev_pair("//Bob"));
    let timeout = Duration::from_secs(120);
    // Alice posts every job of this test: the next id is the number she has.
    let known = node.call("ergon_jobsOf", json!([alice.public().to_ss58check()])).expect("jobsOf");
    let id = known.as_array().map_or(0, |a| a.len() as u64);
    let best = node.block_number(None).expect("best block");
    node.send(&post_job_call(MARKET, spec, 10 * ERG, 10, best + 500), &alice, timeout);
    node.send(&bid_call(MARKET, id, 5 * ERG), &bob, timeout);
    node.send(&accept_bid_call(MARKET, id, &bob.public().0), &alice, timeout);
    node.send(&submit_bundle_call(MARKET, id, root, uri, [6; 32]), &bob, timeout);
    let job = node.call("ergon_job", json!([id])).expect("ergon_job");
    assert_eq!(job["state"]["status"], "verifying", "job {id}: {job}");
    id
}

#[test]
fn offchain_workers_attest_served_bundles_and_fail_unserved_ones() {
    let dir = tempfile::tempdir().expect("temp dir");
    let args: Vec<String> = ["--dev", "--tmp"].iter().map(|s| s.to_string()).collect();
    let node = Node::start("dev", Ports::free(), &args, dir.path());
    node.wait_finalized(1, Duration::from_secs(180));

    let spec: ergon_job_spec::JobSpec =
        serde_json::from_str(include_str!("../../worker/examples/fashion-mnist-mlp.json"))
            .expect("example spec parses");
    let checkpoints = spec.validate().expect("example spec is valid").checkpoints;
    let (manifest, file, root) = bundle(checkpoints);
    let server = BundleServer::start(HashMap::from([
        (format!("/job/{MANIFEST_FILE}"), manifest),
        ("/job/ckpt-00000000.safetensors".to_string(), file),
    ]));
    let bob = dev_pair("//Bob");
    node.send(&bond_call(STAKING, 2_000 * ERG), &bob, Duration::from_secs(120));

    // A served bundle: the manifest, then two sampled chunks by range, and an "available" attestation.
    let uri = format!("http://127.0.0.1:{}/job", server.port);
    let served = committed_job(&node, &spec, root, &uri);
    let attested = wait_for("Alice's attestation", Duration::from_secs(120), || {
        Some(attestations(&node, served)).filter(|a| !a.is_empty())
    });
    assert_eq!(attested, vec![(dev_pair("//Alice").public().0, true)]);
    let requests = server.requests.lock().unwrap().clone();
    assert_eq!(requests[0], (format!("/job/{MANIFEST_FILE}"), None));
    let ranges: Vec<_> = requests[1..].iter().filter_map(|(_, r)| r.clone()).collect();
    assert_eq!(ranges.len(), 2, "two chunks sampled: {requests:?}");
    for r in &ranges {
        assert!(
            ["bytes=0-1048575", "bytes=1048576-2097151", "bytes=2097152-2621439"]
                .contains(&r.as_str()),
            "a whole chunk: {r}"
        );
    }
    let job = node.call("ergon_job", json!([served])).expect("ergon_job");
    assert_eq!(job["state"]["status"], "verifying", "an available bundle goes on to verification");

    // A bundle nobody serves: Alice attests it unavailable, which is the quorum of one attester.
    let ledger =
        |n: &Node| n.storage_decoded::<StakingLedger>(&staking_ledger_key(&bob.public().0));
    let bond_before = ledger(&node).expect("Bob is bonded").active;
    let dead = format!("http://127.0.0.1:{}/gone", free_port());
    let unserved = committed_job(&node, &spec, root, &dead);
    let failed = wait_for("the unserved job to fail", Duration::from_secs(120), || {
        let job = node.call("ergon_job", json!([unserved])).ok()?;
        (job["state"]["status"] == "failed").then_some(job)
    });
    assert_eq!(failed["state"]["reason"], "Unavailable", "{failed}");
    let bond_after = ledger(&node).expect("Bob is still bonded").active;
    // All of its collateral, the 5 ERG price it bid, is slashed.
    assert_eq!(bond_after, bond_before - 5 * ERG, "the trainer loses its collateral");
}
