//! The Proof-of-Training verifier on real bundles: an honest one passes every check; corrupted,
//! truncated, re-seeded and forged ones fail on the check meant to catch them, with a report rather
//! than an error.

mod common;

use std::path::Path;

use ergon_engine::{
    bundle::{self, checkpoint, HostTensors, Manifest, MANIFEST_FILE},
    data::hex,
    train::{self, Outcome, TrainOptions},
    verify::{self, VerifyOptions},
};
use ergon_job_spec::JobSpec;

const SEED: [u8; 32] = [7; 32];

/// Trains the CSV task (3 epochs of 10 steps, a checkpoint every 4 steps: 9 checkpoints) into `out`.
fn honest(dir: &Path, out: &Path) -> (JobSpec, [u8; 32]) {
    let spec = common::csv_spec(dir);
    let opts = TrainOptions::new(out.into(), SEED);
    match train::train(&spec, &opts).expect("training works") {
        Outcome::Finished(r) => (spec, r.root),
        Outcome::Halted(_) => unreachable!("no halt requested"),
    }
}

fn all_segments(out: &Path) -> VerifyOptions {
    let mut opts = VerifyOptions::new(out.into(), SEED);
    opts.segments = (0..8).collect();
    opts
}

fn manifest(out: &Path) -> Manifest {
    serde_json::from_slice(&std::fs::read(out.join(MANIFEST_FILE)).unwrap()).unwrap()
}

fn write_manifest(out: &Path, m: &Manifest) {
    std::fs::write(out.join(MANIFEST_FILE), m.to_bytes().unwrap()).unwrap();
}

/// Rewrites checkpoint `index` with `f` applied to its tensors, and updates the manifest so that the
/// bundle is self-consistent (what a forger would do).
fn forge_checkpoint(out: &Path, index: usize, f: impl Fn(&str, &mut Vec<f32>)) {
    let mut m = manifest(out);
    let entry = &mut m.checkpoints[index];
    let mut host = HostTensors::read(&out.join(&entry.file)).unwrap();
    for (name, (_, values)) in host.0.iter_mut() {
        f(name, values);
    }
    let written = host.write(&out.join(&entry.file)).unwrap();
    let hashes = host.hashes();
    entry.file_sha256 = hex(&written.sha256);
    entry.file_bytes = written.bytes;
    entry.chunks = written.chunks.iter().map(|h| hex(h)).collect();
    entry.digest = hex(&checkpoint::digest(hashes.values()));
    entry.tensors = hashes.iter().map(|(n, h)| (n.clone(), hex(h))).collect();
    if index == m.checkpoints.len() - 1 {
        let weights: Vec<[u8; 32]> =
            hashes.iter().filter(|(n, _)| n.starts_with("param.")).map(|(_, h)| *h).collect();
        m.final_model_hash = hex(&checkpoint::digest(weights.iter()));
    }
    write_manifest(out, &m);
}

#[test]
fn an_honest_bundle_passes_every_check() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("bundle");
    let (spec, root) = honest(dir.path(), &out);
    let mut opts = all_segments(&out);
    opts.expected_root = Some(root);
    let report = verify::verify(&spec, &opts).unwrap();
    assert!(report.passed, "{:#?}", report.checks);
    let names: Vec<&str> = report.checks.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        &names[..7],
        ["files", "root", "manifest", "weights", "states", "optimizer", "init"]
    );
    assert_eq!(names.iter().filter(|n| n.starts_with("replay")).count(), 8);
    assert_eq!(names.iter().filter(|n| n.starts_with("rule:")).count(), 6);
    // Same machine, same threads: the replay is bit-exact.
    let replay = report.checks.iter().find(|c| c.name.starts_with("replay")).unwrap();
    assert!(replay.measured.contains("relative error 0.000e0"), "{replay:?}");
    // Every end tensor matched its committed hash: none of the end checkpoints was read.
    let tensors = manifest(&out).checkpoints[1].tensors.len();
    let exact = format!("{tensors} of {tensors} end tensors bit-exact by hash");
    assert!(replay.measured.contains(&exact), "{replay:?}");
    // The evidence hash is a hash of the report: the same report, the same hash.
    assert_eq!(report.evidence_hash(), verify::verify(&spec, &opts).unwrap().evidence_hash());
}

/// The replay evidence of a pass: two honest verifications of a segment sketch it alike (bit for
/// bit on one machine), a verifier that guesses a straight trajectory from the two checkpoints
/// (all it has without replaying) disagrees, and so does a sketch of another bundle.
#[test]
fn honest_replays_sketch_alike_and_a_verifier_that_did_not_replay_cannot_guess_the_sketch() {
    use ergon_protocol::evidence::{agree, agree_all};
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("bundle");
    let (spec, root) = honest(dir.path(), &out);
    let opts = all_segments(&out);
    let a = verify::verify(&spec, &opts).unwrap();
    let b = verify::verify(&spec, &opts).unwrap();
    assert_eq!(a.sketches.len(), 8);
    assert_eq!(a.sketches, b.sketches);
    assert!(a.sketches.iter().map(|s| s.segment).eq(0..8));
    let m = manifest(&out);
    let weights = |i: usize| -> Vec<f32> {
        let host = HostTensors::read(&out.join(&m.checkpoints[i].file)).unwrap();
        verify::checkpoint_evidence_weights(&host)
    };
    let mut partial = 0;
    for s in &a.sketches {
        let i = s.segment as usize;
        let (from, to) = (m.checkpoints[i].step, m.checkpoints[i + 1].step);
        // Segments of 4 steps (the last one shorter): probes at the second half's steps.
        assert_eq!(s.probes, ergon_protocol::evidence::probe_steps(from, to));
        assert_eq!(s.probes.last(), Some(&(to - 1)));
        let sketches = s.sketches();
        assert_eq!(sketches.len(), s.probes.len());
        let key = ergon_protocol::evidence::key(&root, s.segment);
        let (start, end) = (weights(i), weights(i + 1));
        // Without the replay: the straight line between the checkpoints.
        let blind = verify::Sketcher::new(&key, (from, to), &start).guess_straight(&end);
        assert!(agree_all(&sketches, &sketches));
        assert!(!agree_all(&sketches, &blind), "segment {i}: a straight guess agreed");
        // Replaying up to the first probe and guessing the rest (issue 34: the probe was one
        // public step, and stopping there saved a quarter of the replay) fails the last probe.
        if sketches.len() >= 2 {
            let to_first_probe = vec![sketches[0], blind[1]];
            assert!(!agree(&sketches[1], &blind[1]), "segment {i}");
            assert!(!agree_all(&sketches, &to_first_probe));
            partial += 1;
        }
        // A sketch from another bundle's key does not agree either.
        let other = ergon_protocol::evidence::key(&[0; 32], s.segment);
        let elsewhere = verify::Sketcher::new(&other, (from, to), &start).guess_straight(&end);
        assert!(!agree_all(&sketches, &elsewhere));
    }
    assert!(partial >= 7, "the full segments have two probes each");
}

#[test]
fn challenged_segments_are_distinct_deterministic_and_in_range() {
    let a = verify::segments_from_challenge(b"block 42", 8, 3);
    assert_eq!(a, verify::segments_from_challenge(b"block 42", 8, 3));
    // Three drawn uniformly (the last segment has no special place: a forger cannot rely on which).
    assert_eq!(a.len(), 3);
    // A 32-byte challenge is the chain's draw seed itself: the same segments as the protocol's draw.
    let seed = [5u8; 32];
    assert_eq!(
        verify::segments_from_challenge(&seed, 8, 3),
        ergon_protocol::segments::draw(&seed, 8, 3)
    );
    assert!(a.windows(2).all(|w| w[0] < w[1]) && a.iter().all(|s| *s < 8));
    assert_eq!(verify::segments_from_challenge(b"x", 2, 5), vec![0, 1]);
    assert_ne!(a, verify::segments_from_challenge(b"block 43", 8, 3));
}

#[test]
fn update_comparison() {
    let (rel, cos) = verify::compare_updates(&[1.0, 2.0], &[1.0, 2.0]);
    assert!(rel == 0.0 && (cos - 1.0).abs() < 1e-12);
    let (rel, cos) = verify::compare_updates(&[-1.0, -2.0], &[1.0, 2.0]);
    assert!((rel - 2.0).abs() < 1e-12 && (cos + 1.0).abs() < 1e-12);
    let (rel, cos) = verify::compare_updates(&[0.5, 1.0], &[1.0, 2.0]);
    assert!(
        (rel - 0.5).abs() < 1e-12 && (cos - 1.0).abs() < 1e-12,
        "half an update is caught by ε"
    );
    assert_eq!(verify::compare_updates(&[1.0], &[1.0, 2.0]).0, f64::INFINITY);
}

#[test]
fn a_corrupted_checkpoint_fails_the_files_check() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("bundle");
    let (spec, _) = honest(dir.path(), &out);
    let file = out.join(bundle::checkpoint_file(4));
    let mut bytes = std::fs::read(&file).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&file, bytes).unwrap();
    let report = verify::verify(&spec, &all_segments(&out)).unwrap();
    assert!(!report.passed);
    assert_eq!(report.first_failure().unwrap().name, "files");
}

#[test]
fn truncated_or_missing_files_give_a_failing_report_not_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("bundle");
    let (spec, _) = honest(dir.path(), &out);
    let file = out.join(bundle::checkpoint_file(8));
    let bytes = std::fs::read(&file).unwrap();
    std::fs::write(&file, &bytes[..bytes.len() / 2]).unwrap();
    let report = verify::verify(&spec, &all_segments(&out)).unwrap();
    assert_eq!(report.first_failure().unwrap().name, "files");

    let manifest_path = out.join(MANIFEST_FILE);
    let bytes = std::fs::read(&manifest_path).unwrap();
    std::fs::write(&manifest_path, &bytes[..bytes.len() / 2]).unwrap();
    let report = verify::verify(&spec, &all_segments(&out)).unwrap();
    assert!(!report.passed);
    assert_eq!(report.first_failure().unwrap().name, "files");

    std::fs::remove_file(&manifest_path).unwrap();
    assert!(!verify::verify(&spec, &all_segments(&out)).unwrap().passed);
}

#[test]
fn another_seed_fails_the_manifest_check() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("bundle");
    let (spec, _) = honest(dir.path(), &out);
    let mut opts = all_segments(&out);
    opts.expected_seed = [8; 32];
    let report = verify::verify(&spec, &opts).unwrap();
    assert_eq!(report.first_failure().unwrap().name, "manifest");
    // A bundle of another spec fails the same way.
    let mut other = spec.clone();
    other.epochs = 2;
    let report = verify::verify(&other, &all_segments(&out)).unwrap();
    assert_eq!(report.first_failure().unwrap().name, "manifest");
}

#[test]
fn a_bundle_of_another_precision_fails_the_manifest_check() {
    // Attack: train in TF32 or f16 on a GPU (faster) for an f32 job. Declared, the manifest check
    // refuses it; undeclared, the replay in f32 measures the difference (the forgers' tests).
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("bundle");
    let (spec, _) = honest(dir.path(), &out);
    let mut m = manifest(&out);
    m.environment.precision = "tf32".into();
    write_manifest(&out, &m);
    let report = verify::verify(&spec, &all_segments(&out)).unwrap();
    let failure = report.first_failure().unwrap();
    assert_eq!(failure.name, "manifest");
    assert!(failure.measured.contains("precision"), "{}", failure.measured);
}

#[test]
fn attack_a_bundle_of_another_class_than_declared_fails_before_any_replay() {
    // Attack (issue 37): train on a CPU and declare a GPU class on chain, so that GPU verifiers
    // are drawn and replay the bundle on their CPUs, slower than the capacity they declared, and
    // miss their window. The manifest names the CPU: the bundle fails the manifest check, and
    // nothing is replayed.
    use ergon_protocol::DeviceClass::{Cpu, Cuda};
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("bundle");
    let (spec, _) = honest(dir.path(), &out);
    let mut opts = all_segments(&out);
    opts.expected_class = Some(Cuda { capability: 90 });
    let report = verify::verify(&spec, &opts).unwrap();
    let failure = report.first_failure().unwrap();
    assert_eq!(failure.name, "manifest");
    assert!(failure.measured.contains("class declared on chain"), "{}", failure.measured);
    assert!(!report.checks.iter().any(|c| c.name.starts_with("replay")), "{:?}", report.checks);
    // Declared as what it is, it passes.
    opts.expected_class = Some(Cpu);
    assert!(verify::verify(&spec, &opts).unwrap().passed);
}

#[test]
fn a_bundle_of_other_kernels_fails_and_a_worker_of_other_kernels_gives_no_verdict() {
    // Replay is exact only between identical kernels: the chain pins each job to a revision. A
    // bundle that names another (trained by an old or a patched worker) fails the manifest check;
    // a verifier running another revision gives no verdict at all rather than fail an honest
    // trainer on the spread between revisions.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("bundle");
    let (spec, _) = honest(dir.path(), &out);
    assert_eq!(manifest(&out).environment.kernels, ergon_engine::KERNELS_REVISION);
    let mut pinned_elsewhere = all_segments(&out);
    pinned_elsewhere.kernels = ergon_engine::KERNELS_REVISION + 1;
    assert!(matches!(
        verify::verify(&spec, &pinned_elsewhere),
        Err(ergon_engine::Error::OtherKernels { job, ours })
            if job == ergon_engine::KERNELS_REVISION + 1 && ours == ergon_engine::KERNELS_REVISION
    ));
    let mut m = manifest(&out);
    m.environment.kernels += 1;
    write_manifest(&out, &m);
    let report = verify::verify(&spec, &all_segments(&out)).unwrap();
    let failure = report.first_failure().unwrap();
    assert_eq!(failure.name, "manifest");
    assert!(failure.measured.contains("kernels revision"), "{}", failure.measured);
}

#[test]
fn a_convolutional_bundle_trained_on_a_gpu_fails_the_device_check_on_every_verifier() {
    // A GPU's training of a CNN replays on a CPU off by more than ε (measured on an H100), and a
    // GPU verifier would replay it exactly: verdicts would depend on who was drawn, and a dispute
    // would slash its honest minority. So a convolutional job trains on the CPU, every verifier
    // replays it there, and one whose manifest names another device fails. Played with CPU
    // trainings that claim a GPU: the replays pass (the CPU replays them exactly), the device
    // check fails the CNN's and not the MLP's.
    let dir = tempfile::tempdir().unwrap();
    let claim_gpu = |out: &Path| {
        let mut m = manifest(out);
        m.environment.device = "cuda:0".into();
        write_manifest(out, &m);
    };
    let cnn = common::idx_spec(dir.path());
    let out = dir.path().join("cnn");
    let trained = train::train(&cnn, &TrainOptions::new(out.clone(), SEED)).unwrap();
    assert!(matches!(trained, Outcome::Finished(_)));
    claim_gpu(&out);
    let mut opts = VerifyOptions::new(out, SEED);
    opts.segments = vec![0, 1];
    let report = verify::verify(&cnn, &opts).unwrap();
    let failures: Vec<_> = report.checks.iter().filter(|c| !c.passed).collect();
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert_eq!(failures[0].name, "device");
    assert!(report.checks.iter().any(|c| c.name.starts_with("replay[") && c.passed));

    let out = dir.path().join("mlp");
    let (mlp, _) = honest(dir.path(), &out);
    claim_gpu(&out);
    let report = verify::verify(&mlp, &all_segments(&out)).unwrap();
    assert!(report.passed, "{:?}", report.first_failure());
}

#[test]
fn a_permuted_initialization_fails_the_init_check() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("bundle");
    let (spec, _) = honest(dir.path(), &out);
    // Rank-matched permutation of C0's weights: same distribution, not Init(seed).
    forge_checkpoint(&out, 0, |name, values| {
        if name.starts_with("param.") {
            values.reverse();
        }
    });
    let report = verify::verify(&spec, &all_segments(&out)).unwrap();
    assert_eq!(report.first_failure().unwrap().name, "init");
}

#[test]
fn an_interpolated_segment_fails_its_replay() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("bundle");
    let (spec, _) = honest(dir.path(), &out);
    // C3 moved a little towards C2: an "infinitesimal update" forgery of one segment.
    let c2 = HostTensors::read(&out.join(bundle::checkpoint_file(8))).unwrap();
    forge_checkpoint(&out, 3, |name, values| {
        if let Some((_, before)) = c2.0.get(name) {
            if name.starts_with("param.") {
                for (v, b) in values.iter_mut().zip(before) {
                    *v = b + 0.9 * (*v - b);
                }
            }
        }
    });
    let report = verify::verify(&spec, &all_segments(&out)).unwrap();
    assert!(!report.passed);
    let failed: Vec<&str> =
        report.checks.iter().filter(|c| !c.passed).map(|c| c.name.as_str()).collect();
    // Segment 2 (C2 → C3) ends at the forged checkpoint, segment 3 starts from it.
    assert!(failed.contains(&"replay[2]"), "{failed:?}");
    assert!(!failed.contains(&"init") && !failed.contains(&"files"), "{failed:?}");
}

#[test]
fn a_tampered_final_model_fails_final_hash_or_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("bundle");
    let (spec, _) = honest(dir.path(), &out);
    let mut m = manifest(&out);
    m.metrics.validation_accuracy = (m.metrics.validation_accuracy + 0.1).min(1.0) - 0.05;
    write_manifest(&out, &m);
    let report = verify::verify(&spec, &all_segments(&out)).unwrap();
    assert_eq!(report.first_failure().unwrap().name, "metrics");

    let mut opts = all_segments(&out);
    opts.expected_final_model = Some([0; 32]);
    let report = verify::verify(&spec, &opts).unwrap();
    assert!(report.checks.iter().any(|c| c.name == "final_model" && !c.passed));
}

#[test]
fn the_rules_sample_long_chains_on_a_grid_drawn_from_the_challenge() {
    let (all, grid) = verify::rule_sample(9, &[1; 32]);
    assert_eq!((all.clone(), grid), ((0..9).collect::<Vec<_>>(), all));
    let mut offsets = std::collections::BTreeSet::new();
    for c in 0..64u8 {
        let (picks, grid) = verify::rule_sample(188, &verify::rule_seed(&[c], &[3, 9]));
        assert!(picks.len() <= verify::RULE_CHECKPOINTS);
        assert_eq!((picks[0], *picks.last().unwrap()), (0, 187));
        assert!(picks.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(grid.len(), verify::RULE_CHECKPOINTS - 2);
        assert!(grid.windows(3).all(|w| w[1] - w[0] == w[2] - w[1]), "evenly spaced: {grid:?}");
        assert!(grid.iter().all(|g| picks.contains(g)));
        offsets.insert(grid[0]);
    }
    // The forger cannot know which checkpoints are read: the grid moves with the challenge.
    assert!(offsets.len() > 5, "{offsets:?}");
    assert_eq!(
        verify::rule_sample(188, &verify::rule_seed(b"x", &[1])),
        verify::rule_sample(188, &verify::rule_seed(b"x", &[1]))
    );
}

/// A manifest whose per-tensor hashes of a checkpoint are not those its leaf commits to (the hashes
/// an end state is compared with, and parts are read against): the files check refuses it, from
/// the manifest alone, whichever checkpoint it is and whether or not it is read.
#[test]
fn tensor_hashes_that_are_not_the_leaf_fail_the_files_check() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("bundle");
    let (spec, _) = honest(dir.path(), &out);
    let mut m = manifest(&out);
    let entry = &mut m.checkpoints[5];
    let name = entry.tensors.keys().next().unwrap().clone();
    entry.tensors.insert(name, hex(&[7; 32]));
    write_manifest(&out, &m);
    let mut opts = VerifyOptions::new(out, SEED);
    opts.segments = vec![0];
    let report = verify::verify(&spec, &opts).unwrap();
    let files = report.checks.iter().find(|c| c.name == "files").unwrap();
    assert!(
        !files.passed && files.measured.contains("not the hash of its tensor hashes"),
        "{files:?}"
    );
}
