//! Bundles over HTTP: the daemon's server (async, byte ranges) and the engine's downloads
//! together. A verifier downloads the manifest and only the checkpoints its checks read, and its
//! verdict is the one it would give on the whole bundle.

#[path = "../engine/tests/common/mod.rs"]
mod common;

use std::{
    path::{Path, PathBuf},
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
};

use ergon_engine::{
    bundle::{self, Manifest, MANIFEST_FILE},
    train::{self, Outcome, TrainOptions},
    verify::{self, VerifyOptions},
};
use ergon_worker::serve::Server;

const SEED: [u8; 32] = [7; 32];

/// Trains the CSV task (9 checkpoints) into `out`; returns its root.
fn honest(dir: &Path, out: &Path) -> (ergon_job_spec::JobSpec, [u8; 32]) {
    let spec = common::csv_spec(dir);
    match train::train(&spec, &TrainOptions::new(out.into(), SEED)).expect("training works") {
        Outcome::Finished(r) => (spec, r.root),
        Outcome::Halted(_) => unreachable!("no halt requested"),
    }
}

/// Serves `dir` on a loopback port from a runtime of its own thread; returns the URL and the count
/// of body bytes the server sends.
fn serve(dir: PathBuf) -> (String, Arc<AtomicU64>) {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async move {
            let server = Server::bind("127.0.0.1:0", &dir).await.expect("bind");
            tx.send((server.local_addr().expect("address"), server.bytes_served())).unwrap();
            server.run(std::future::pending()).await.unwrap();
        });
    });
    let (addr, served) = rx.recv().unwrap();
    (format!("http://{addr}"), served)
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn a_served_bundle_is_fetched_and_verified() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("bundle");
    let (spec, root) = honest(dir.path(), &out);
    let (url, _) = serve(out.clone());
    let local = dir.path().join("downloaded");
    bundle::fetch(&url, &local).expect("the bundle downloads");
    let mut opts = VerifyOptions::new(local, SEED);
    opts.segments = (0..8).collect();
    opts.expected_root = Some(root);
    assert!(verify::verify(&spec, &opts).unwrap().passed);
    // A URL serving nothing, or nothing listening at all, is an error (not the trainer's verdict to
    // give).
    assert!(bundle::fetch(&format!("{url}/missing"), &dir.path().join("none")).is_err());
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let unreachable = bundle::fetch(&format!("http://{closed}/b"), &dir.path().join("none"));
    assert!(unreachable.is_err_and(|e| e.to_string().contains("downloading")));
}

/// Trains the CSV task with a checkpoint every step (31 checkpoints, more than the rules read) into
/// `out`; returns the spec and the root.
fn long(dir: &Path, out: &Path) -> (ergon_job_spec::JobSpec, [u8; 32]) {
    let mut spec = common::csv_spec(dir);
    spec.checkpoint_interval = 1;
    match train::train(&spec, &TrainOptions::new(out.into(), SEED)).unwrap() {
        Outcome::Finished(r) => (spec, r.root),
        Outcome::Halted(_) => unreachable!(),
    }
}

/// A verifier drawn for one segment of a long bundle downloads the manifest, the checkpoints it
/// reads whole (the segment's start and the last checkpoint) and, by byte ranges, the chunks of
/// the rules' coordinate sample of the other checkpoints the rules look at: never the segment's
/// end (its replay reproduces the committed hashes). Counted in the bytes the trainer's server
/// sent, to the byte; the verdict is the one it gives on the whole bundle.
#[test]
fn a_verifier_downloads_only_what_it_reads() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("bundle");
    let (spec, root) = long(dir.path(), &out);
    let manifest = bundle::inspect(&out).unwrap().manifest;
    let total = manifest.checkpoints.len();
    let (url, served) = serve(out.clone());

    let local = dir.path().join("verifier");
    let mut opts = VerifyOptions::new(local.clone(), SEED);
    opts.source = Some(url.clone());
    opts.segments = vec![11];
    opts.expected_root = Some(root);
    let fetched = verify::fetch_for(&spec, &url, &opts).unwrap();
    let selection = verify::selection(&opts, &manifest);
    assert_eq!(selection.read, vec![11, total - 1], "the start and the last, whole");
    assert_eq!(fetched, selection.read.len());
    assert!(!selection.sampled.is_empty());
    let mut expected: Vec<String> =
        selection.read.iter().map(|i| manifest.checkpoints[*i].file.clone()).collect();
    expected.push(MANIFEST_FILE.to_string());
    expected.sort();
    assert_eq!(files_in(&local), expected, "exactly the manifest and the checkpoints read whole");

    let partial = verify::verify(&spec, &opts).unwrap();
    assert!(partial.passed, "{:?}", partial.first_failure());
    let mut whole_opts = VerifyOptions::new(out.clone(), SEED);
    whole_opts.segments = vec![11];
    whole_opts.expected_root = Some(root);
    let whole = verify::verify(&spec, &whole_opts).unwrap();
    assert_eq!(partial.evidence_hash(), whole.evidence_hash());

    // The bytes: the manifest, the two whole files, and of each other checkpoint of the rules'
    // sample the chunks of the rules' coordinate sample (drawn from the last checkpoint's layout;
    // for this small model the one chunk that holds all of it).
    let size = |i: &usize| manifest.checkpoints[*i].file_bytes;
    let last = manifest.checkpoints.last().unwrap();
    let layout = ergon_engine::trajectory::layout(&spec).unwrap();
    let last_file = out.join(&last.file).to_string_lossy().into_owned();
    let (map, _) = bundle::ranges::read_header(&last_file, last, &layout).unwrap();
    let coordinates = verify::CoordinateSample::draw(
        &map,
        last.file_bytes,
        &verify::rule_seed(&opts.challenge, &selection.segments),
    );
    assert!(coordinates.complete && !coordinates.chunks.is_empty());
    let chunk_bytes = |file: u64| -> u64 {
        let mib = 1u64 << 20;
        coordinates.chunks.iter().map(|c| file.min((c + 1) * mib) - c * mib).sum()
    };
    let manifest_bytes = std::fs::metadata(out.join(MANIFEST_FILE)).unwrap().len();
    let expected = manifest_bytes
        + selection.read.iter().map(size).sum::<u64>()
        + selection.sampled.iter().map(|i| chunk_bytes(size(i))).sum::<u64>();
    let bundle: u64 = (0..total).map(|i| size(&i)).sum();
    let sent = served.load(Ordering::Relaxed);
    assert_eq!(sent, expected, "served {sent} bytes of a {bundle}-byte bundle");
    assert!(sent - manifest_bytes < bundle, "never the whole bundle");
}

/// Multiplies the weights of checkpoint `index` of the bundle at `out` by 1.01, rewrites its file
/// and the manifest's file entry (hash, length, chunk list) and, with `tensors`, its tensor hashes
/// and leaf too; returns the manifest and the altered tensors.
fn nudge_weights(out: &Path, index: usize, tensors: bool) -> (Manifest, bundle::HostTensors) {
    let mut manifest = bundle::inspect(out).unwrap().manifest;
    let entry = &mut manifest.checkpoints[index];
    let path = out.join(&entry.file);
    let mut host = bundle::HostTensors::read(&path).unwrap();
    for (name, (_, values)) in host.0.iter_mut() {
        if name.starts_with("param.") {
            values.iter_mut().for_each(|v| *v *= 1.01);
        }
    }
    let written = host.write(&path).unwrap();
    let hex = ergon_engine::data::hex;
    entry.file_sha256 = hex(&written.sha256);
    entry.file_bytes = written.bytes;
    entry.chunks = written.chunks.iter().map(|h| hex(h)).collect();
    if tensors {
        entry.tensors = host.hashes().iter().map(|(n, h)| (n.clone(), hex(h))).collect();
        entry.digest = hex(&bundle::checkpoint::digest(host.hashes().values()));
    }
    std::fs::write(out.join(MANIFEST_FILE), manifest.to_bytes().unwrap()).unwrap();
    (manifest, host)
}

/// The report of a verifier replaying `segment` of the bundle served at `url`, downloading into
/// `into` what it reads whole.
fn verify_served(
    spec: &ergon_job_spec::JobSpec,
    url: &str,
    into: PathBuf,
    segment: u32,
) -> verify::Report {
    let mut opts = VerifyOptions::new(into, SEED);
    opts.source = Some(url.to_string());
    opts.segments = vec![segment];
    verify::fetch_for(spec, url, &opts).unwrap();
    verify::verify(spec, &opts).unwrap()
}

/// A forged end of the drawn segment (self-consistent: the manifest lists the forged tensors'
/// hashes, and the root commits to them): the replay's hashes differ, the verifier reads only the
/// differing tensors by byte ranges and fails the segment with the measured error. A trainer that
/// pruned the drawn segment's start cannot serve it: the download fails (a fail vote once a daemon's
/// attempts are spent).
#[test]
fn an_end_state_that_is_not_the_replay_fails_and_a_pruned_start_cannot_be_served() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("bundle");
    let (spec, _) = long(dir.path(), &out);
    // The forger nudges the weights of checkpoint 12 and rewrites its entry, tensors and all.
    let (manifest, host) = nudge_weights(&out, 12, true);

    let (url, _) = serve(out.clone());
    let report = verify_served(&spec, &url, dir.path().join("verifier"), 11);
    assert!(!report.passed);
    let replay = report.checks.iter().find(|c| c.name == "replay[11]").unwrap();
    let weights = host.0.keys().filter(|n| n.starts_with("param.")).count();
    let exact = format!("{} of {} end tensors bit-exact", host.0.len() - weights, host.0.len());
    assert!(!replay.passed && replay.measured.contains(&exact), "{replay:?}");
    assert_eq!(report.failed_segment(), Some(11));

    // Pruned before the challenge ended: the drawn start is gone.
    std::fs::remove_file(out.join(&manifest.checkpoints[11].file)).unwrap();
    let mut opts = VerifyOptions::new(dir.path().join("verifier-2"), SEED);
    opts.source = Some(url.clone());
    opts.segments = vec![11];
    let err = verify::fetch_for(&spec, &url, &opts).unwrap_err().to_string();
    assert!(err.contains("404"), "{err}");
}

/// A checkpoint committed twice over, differently: its tensor hashes (the Merkle leaf, what a
/// replay compares) are the honest run's, its file and chunk list (what the rules' chunks and the
/// chain's availability samples are read against) another set of weights. The replay of the
/// segment ending there reproduces every tensor hash, and fails: the file listed is not the
/// canonical file of those tensors. Read whole as a segment's start it fails the files check.
#[test]
fn attack_a_file_that_is_not_its_tensors_fails_the_segment_next_to_it() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("bundle");
    let (spec, _) = long(dir.path(), &out);
    // The file and its chunk list are the altered weights'; the tensor hashes and the leaf stay.
    nudge_weights(&out, 12, false);

    let (url, _) = serve(out.clone());
    let ending = verify_served(&spec, &url, dir.path().join("ending"), 11);
    let replay = ending.checks.iter().find(|c| c.name == "replay[11]").unwrap();
    assert!(!replay.passed, "{replay:?}");
    assert!(replay.measured.contains("bit-exact") && replay.measured.contains("canonical"));
    assert_eq!(ending.failed_segment(), Some(11));

    let starting = verify_served(&spec, &url, dir.path().join("starting"), 12);
    let files = starting.checks.iter().find(|c| c.name == "files").unwrap();
    assert!(!files.passed, "{files:?}");
}

/// The rules' chunks are held to the manifest: a checkpoint of the rules' sample whose file is
/// served other than listed (a chunk that is not its hash), or listed with another length than the
/// layout's (so its chunks would hold other coordinates), fails the `weights` check before any
/// replay, naming the checkpoint's file.
#[test]
fn a_rule_checkpoint_served_or_listed_otherwise_fails_the_weights_check() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("bundle");
    let (spec, _) = long(dir.path(), &out);
    let manifest = bundle::inspect(&out).unwrap().manifest;
    let mut opts = VerifyOptions::new(dir.path().join("unused"), SEED);
    opts.segments = vec![11];
    let sampled = verify::selection(&opts, &manifest).sampled;
    let (first, second) = (sampled[0], sampled[1]);

    // Served otherwise: the file's bytes change, its listed chunks do not.
    let served = out.join(&manifest.checkpoints[first].file);
    let mut bytes = std::fs::read(&served).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x40;
    std::fs::write(&served, bytes).unwrap();
    // Listed otherwise: another length (as many chunks).
    let mut lying = manifest.clone();
    let entry = &mut lying.checkpoints[second];
    entry.file_bytes += 4;
    std::fs::write(out.join(MANIFEST_FILE), lying.to_bytes().unwrap()).unwrap();

    let (url, _) = serve(out.clone());
    let report = verify_served(&spec, &url, dir.path().join("verifier"), 11);
    assert!(!report.passed);
    let weights = report.checks.iter().find(|c| c.name == "weights").unwrap();
    assert!(!weights.passed, "{weights:?}");
    assert!(weights.measured.contains("does not match its hash"), "{weights:?}");
    assert!(weights.measured.contains("of the last checkpoint's layout"), "{weights:?}");
    assert!(!report.checks.iter().any(|c| c.name.starts_with("replay")), "no replay after it");
}
