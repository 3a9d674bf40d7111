//! `Bf16Mixed` jobs (docs/protocol.md, *Precision*): they train in the precision the spec names,
//! replay bit for bit on another pool of threads, and a trainer that computes more cheaply than
//! the spec says — bf16 master weights instead of f32 ones — fails the replay.

mod common;

use std::path::{Path, PathBuf};

use ergon_engine::{
    train::{self, Outcome, TrainOptions, TrainReport},
    verify::{self, Report, VerifyOptions},
    Threads,
};
use ergon_job_spec::{JobSpec, Precision};

const SEED: [u8; 32] = [21; 32];

/// The byte-level transformer of the engine's tests (attention, GELU MLP, layer norms, AdamW) in
/// `precision`.
fn transformer(dir: &Path, precision: Precision) -> JobSpec {
    let mut spec = common::text_spec(dir);
    spec.precision = precision;
    spec.validate().expect("the test spec is valid");
    spec
}

fn train_on(spec: &JobSpec, out: PathBuf, threads: usize) -> TrainReport {
    let opts = TrainOptions {
        threads: Some(Threads::new(threads).unwrap()),
        ..TrainOptions::new(out, SEED)
    };
    match train::train(spec, &opts).unwrap() {
        Outcome::Finished(r) => r,
        Outcome::Halted(s) => panic!("halted at {s}"),
    }
}

/// Every segment of `out` replayed on `threads` threads.
fn verify_on(spec: &JobSpec, out: &Path, threads: usize) -> Report {
    let mut opts = VerifyOptions::new(out.to_path_buf(), SEED);
    opts.threads = Some(Threads::new(threads).unwrap());
    let segments = std::fs::read_dir(out)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().starts_with("ckpt-"))
        .count() as u32;
    opts.segments = (0..segments - 1).collect();
    verify::verify(spec, &opts).unwrap()
}

/// Whether every replayed segment ended on the claimed tensors bit for bit (`k of k end tensors
/// bit-exact`).
fn every_replay_exact(report: &Report) -> bool {
    let replays: Vec<_> = report.checks.iter().filter(|c| c.name.starts_with("replay")).collect();
    !replays.is_empty()
        && replays.iter().all(|c| {
            let counts = c.measured.split(" end tensors bit-exact").next().unwrap_or_default();
            let counts = counts.rsplit(": ").next().unwrap_or_default();
            matches!(counts.split_once(" of "), Some((a, b)) if a == b)
        })
}

/// A bf16 job trains in bf16 (its checkpoints are not the f32 job's, its manifest says so), learns,
/// and its bundle trained on two threads replays bit for bit on one.
#[test]
fn a_bf16_bundle_replays_bit_exactly_on_another_thread_count() {
    let dir = tempfile::tempdir().unwrap();
    let (f32_spec, bf16_spec) =
        (transformer(dir.path(), Precision::F32), transformer(dir.path(), Precision::Bf16Mixed));
    let f32_run = train_on(&f32_spec, dir.path().join("f32"), 2);
    let out = dir.path().join("bf16");
    let bf16_run = train_on(&bf16_spec, out.clone(), 2);
    assert_eq!(bf16_run.manifest.environment.precision, "bf16-mixed");
    assert_eq!(f32_run.manifest.environment.precision, "f32");
    assert_eq!(
        f32_run.manifest.checkpoints[0].digest, bf16_run.manifest.checkpoints[0].digest,
        "C0 is the seed's draws in both"
    );
    assert_ne!(f32_run.manifest.final_model_hash, bf16_run.manifest.final_model_hash);
    let losses = &bf16_run.manifest.losses;
    assert!(losses.last().unwrap() < losses.first().unwrap(), "bf16 training learns: {losses:?}");
    // bf16 rounding is coarse, not wrong: the two runs' losses stay close.
    for (a, b) in f32_run.manifest.losses.iter().zip(losses) {
        assert!((a - b).abs() < 0.05 * a.abs().max(1.0), "f32 {a} against bf16 {b}");
    }

    let report = verify_on(&bf16_spec, &out, 1);
    assert!(report.passed, "{:#?}", report.checks);
    assert!(every_replay_exact(&report), "{:#?}", report.checks);
}

/// Attack: a bf16 job trained in cheaper arithmetic than the spec says — its weights kept in bf16
/// after every update (no f32 master copy: half the weights' memory, no widening), the bundle's
/// manifest and hashes otherwise honest. The replay in the spec's precision catches it.
#[cfg(feature = "attacks")]
#[test]
fn attack_a_bf16_job_trained_with_bf16_master_weights_fails_its_replays() {
    use ergon_engine::attacks::{forge, Attack};
    let dir = tempfile::tempdir().unwrap();
    let spec = transformer(dir.path(), Precision::Bf16Mixed);
    let out = dir.path().join("forged");
    forge(Attack::ReducedPrecision, &spec, &SEED, &out, 1).expect("the forger writes a bundle");
    let report = verify_on(&spec, &out, 2);
    assert!(!report.passed);
    let failed: Vec<_> = report.checks.iter().filter(|c| !c.passed).map(|c| &c.name).collect();
    assert!(!failed.iter().any(|f| *f == "files"), "malformed forgery: {failed:?}");
    assert!(failed.iter().any(|f| f.starts_with("replay")), "{failed:?}");
    // What the replay measured (docs/threat-model.md quotes it: `--nocapture`).
    for c in report.checks.iter().filter(|c| c.name.starts_with("replay") && !c.passed) {
        eprintln!("{}: {}", c.name, c.measured);
    }
}

/// Attack: a bf16 job trained with FP8 matrix products (E4M3, scaled per tensor: an H100's FP8
/// tensor cores run at twice their bf16 rate), everything else honest. The replay catches it.
#[cfg(feature = "attacks")]
#[test]
fn attack_a_bf16_job_trained_with_fp8_products_fails_its_replays() {
    use ergon_engine::attacks::{forge, Attack};
    let dir = tempfile::tempdir().unwrap();
    let spec = transformer(dir.path(), Precision::Bf16Mixed);
    let out = dir.path().join("forged");
    forge(Attack::Fp8Products, &spec, &SEED, &out, 1).expect("the forger writes a bundle");
    let report = verify_on(&spec, &out, 2);
    let failed: Vec<_> = report.checks.iter().filter(|c| !c.passed).map(|c| &c.name).collect();
    assert!(!failed.iter().any(|f| *f == "files"), "malformed forgery: {failed:?}");
    assert!(failed.iter().any(|f| f.starts_with("replay")), "{failed:?}");
    for c in report.checks.iter().filter(|c| c.name.starts_with("replay") && !c.passed) {
        eprintln!("{}: {}", c.name, c.measured);
    }
}

/// A bundle trained in f32 for a bf16 job (or the other way round) names the wrong precision: the
/// manifest check refuses it before any replay.
#[test]
fn a_bundle_of_the_other_precision_fails_the_manifest_check() {
    let dir = tempfile::tempdir().unwrap();
    let f32_spec = transformer(dir.path(), Precision::F32);
    let out = dir.path().join("f32");
    train_on(&f32_spec, out.clone(), 1);
    let path = out.join(ergon_engine::bundle::MANIFEST_FILE);
    let mut m: ergon_engine::bundle::Manifest =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    m.environment.precision = "bf16-mixed".into();
    std::fs::write(&path, m.to_bytes().unwrap()).unwrap();
    let report = verify_on(&f32_spec, &out, 1);
    let failure = report.checks.iter().find(|c| !c.passed).unwrap();
    assert_eq!(failure.name, "manifest");
    assert!(failure.measured.contains("the job trains in f32"), "{}", failure.measured);
}
