//! End-to-end training: determinism, resume after a crash, bundle integrity, data checks, and a real
//! Fashion-MNIST run.

use std::path::{Path, PathBuf};

use ergon_job_spec::{Bounded, BoundedString, DataFormat, Hash32, JobSpec};
mod common;
use common::{csv_spec, dataset, text_spec};

use ergon_engine::{
    bundle,
    run::Step,
    train::{self, Outcome, TrainOptions},
    Cancel, Error, Threads,
};

fn options(out: PathBuf, halt: Option<u64>) -> TrainOptions {
    TrainOptions { halt_after_step: halt, ..TrainOptions::new(out, [42; 32]) }
}

fn finished(outcome: Outcome) -> train::TrainReport {
    match outcome {
        Outcome::Finished(r) => r,
        Outcome::Halted(s) => panic!("halted at {s}"),
    }
}

fn check_deterministic_and_resumable(spec: &JobSpec, dir: &Path, halt: u64) {
    let a = finished(train::train(spec, &options(dir.join("a"), None)).unwrap());
    let b = finished(train::train(spec, &options(dir.join("b"), None)).unwrap());
    assert_eq!(a.root, b.root, "two runs of the same spec and seed give the same root");
    assert_eq!(a.manifest, b.manifest);

    // Killed after `halt` steps (between checkpoints), a stale temporary file left behind…
    match train::train(spec, &options(dir.join("c"), Some(halt))).unwrap() {
        Outcome::Halted(step) => assert_eq!(step, halt),
        Outcome::Finished(_) => panic!("should have halted"),
    }
    std::fs::write(dir.join("c").join("ckpt-99999999.tmp"), b"half written").unwrap();
    // …and started again: same bundle root as the uninterrupted run.
    let c = finished(train::train(spec, &options(dir.join("c"), None)).unwrap());
    assert_eq!(c.root, a.root, "resumed run gives the same root");

    // A different seed gives a different C0 and root.
    let mut other = options(dir.join("d"), None);
    other.seed = [43; 32];
    let d = finished(train::train(spec, &other).unwrap());
    assert_ne!(d.root, a.root);
    assert_ne!(d.manifest.checkpoints[0].digest, a.manifest.checkpoints[0].digest);

    // inspect recomputes the same root and finds no problem.
    let inspection = bundle::inspect(&dir.join("a")).unwrap();
    assert_eq!(inspection.root, a.root);
    assert!(inspection.problems.is_empty(), "{:?}", inspection.problems);
    assert!(a.manifest.losses.iter().all(|l| l.is_finite()));
    assert_eq!(a.manifest.losses.len() as u64, a.manifest.total_steps);
}

#[test]
fn csv_mlp_sgd_is_deterministic_and_resumes_to_the_same_root() {
    let dir = tempfile::tempdir().unwrap();
    let spec = csv_spec(dir.path());
    check_deterministic_and_resumable(&spec, dir.path(), 7);
    let r = bundle::inspect(&dir.path().join("a")).unwrap();
    // 3 epochs × ceil(150/16) = 30 steps; checkpoints at 0, 4, …, 28 and 30.
    assert_eq!(r.manifest.total_steps, 30);
    assert_eq!(
        r.manifest.checkpoints.iter().map(|c| c.step).collect::<Vec<_>>(),
        vec![0, 4, 8, 12, 16, 20, 24, 28, 30]
    );
    assert!(r.manifest.losses.last().unwrap() < &r.manifest.losses[0], "the loss goes down");
}

/// A daemon lends the machine to a verification by raising the stop token: the training stops at
/// its next checkpoint (after its first step, here) and resumes from it to the same root. Its
/// progress reaches the caller through the step callback.
#[test]
fn a_stopped_training_halts_at_a_checkpoint_and_resumes_to_the_same_root() {
    use std::sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    };
    let dir = tempfile::tempdir().unwrap();
    let spec = csv_spec(dir.path());
    let straight = finished(train::train(&spec, &options(dir.path().join("a"), None)).unwrap());
    let stop = Cancel::new();
    stop.cancel();
    let steps = Arc::new(AtomicU64::new(0));
    let counter = steps.clone();
    let paused = TrainOptions {
        stop: Some(stop.clone()),
        on_step: Some(Arc::new(move |s: &Step| counter.store(s.done, Ordering::Relaxed))),
        ..options(dir.path().join("b"), None)
    };
    // Checkpoints every 4 steps: the raised token stops it at step 4, not before.
    match train::train(&spec, &paused).unwrap() {
        Outcome::Halted(step) => assert_eq!(step, 4),
        Outcome::Finished(_) => panic!("should have paused"),
    }
    assert_eq!(steps.load(Ordering::Relaxed), 4);
    stop.reset();
    let resumed = finished(train::train(&spec, &paused).unwrap());
    assert_eq!(resumed.root, straight.root);
    assert_eq!(steps.load(Ordering::Relaxed), 30);
}

/// The thread pool is the caller's: trainings on pools of 1 and 3 threads in one process (no
/// process-global setting) write the same checkpoints, and each manifest records its pool.
#[test]
fn trainings_on_pools_of_different_sizes_write_the_same_checkpoints() {
    let dir = tempfile::tempdir().unwrap();
    let spec = csv_spec(dir.path());
    let on = |threads: usize, name: &str| {
        let opts = TrainOptions {
            threads: Some(Threads::new(threads).unwrap()),
            ..options(dir.path().join(name), None)
        };
        finished(train::train(&spec, &opts).unwrap())
    };
    let (one, three) = (on(1, "one"), on(3, "three"));
    let digests = |r: &train::TrainReport| {
        r.manifest.checkpoints.iter().map(|c| c.digest.clone()).collect::<Vec<_>>()
    };
    assert_eq!(digests(&one), digests(&three));
    assert_eq!(one.manifest.final_model_hash, three.manifest.final_model_hash);
    assert_eq!(one.manifest.environment.threads, 1);
    assert_eq!(three.manifest.environment.threads, 3);
}

#[test]
fn text_transformer_adamw_is_deterministic_and_resumes_to_the_same_root() {
    let dir = tempfile::tempdir().unwrap();
    let spec = text_spec(dir.path());
    check_deterministic_and_resumable(&spec, dir.path(), 4);
}

#[test]
fn corrupted_or_truncated_checkpoints_are_reported_not_panics() {
    let dir = tempfile::tempdir().unwrap();
    let spec = csv_spec(dir.path());
    let out = dir.path().join("bundle");
    finished(train::train(&spec, &options(out.clone(), None)).unwrap());
    let ckpt = out.join(bundle::checkpoint_file(8));
    let mut bytes = std::fs::read(&ckpt).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x40;
    std::fs::write(&ckpt, &bytes).unwrap();
    std::fs::write(out.join(bundle::checkpoint_file(12)), &bytes[..bytes.len() / 3]).unwrap();
    std::fs::remove_file(out.join(bundle::checkpoint_file(16))).unwrap();
    let r = bundle::inspect(&out).unwrap();
    let joined = r.problems.join("\n");
    assert!(joined.contains("ckpt-00000008"), "{joined}");
    assert!(joined.contains("ckpt-00000012"), "{joined}");
    assert!(joined.contains("ckpt-00000016"), "{joined}");
    // A garbage manifest is an error with the path, not a panic.
    std::fs::write(out.join(bundle::MANIFEST_FILE), b"{not json").unwrap();
    assert!(matches!(bundle::inspect(&out), Err(Error::Bundle { .. })));
}

#[test]
fn wrong_content_root_and_missing_files_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = csv_spec(dir.path());
    spec.train.content_root = Hash32([0xab; 32]);
    let err = train::train(&spec, &options(dir.path().join("x"), None)).err().unwrap();
    assert!(matches!(err, Error::ContentRoot { .. }), "{err}");
    assert!(err.to_string().contains("0xabab"), "{err}");

    let mut spec = csv_spec(dir.path());
    spec.validation.files =
        Bounded::new(vec![BoundedString::from_str("/nonexistent/val.csv").unwrap()]).unwrap();
    let err = train::train(&spec, &options(dir.path().join("y"), None)).err().unwrap();
    assert!(err.to_string().contains("/nonexistent/val.csv"), "{err}");

    let mut spec = csv_spec(dir.path());
    spec.train.samples = 149;
    let err = train::train(&spec, &options(dir.path().join("z"), None)).err().unwrap();
    assert!(err.to_string().contains("149"), "{err}");

    // A directory holding another run is refused rather than mixed.
    let spec = csv_spec(dir.path());
    train::train(&spec, &options(dir.path().join("w"), Some(2))).unwrap();
    let mut other = options(dir.path().join("w"), None);
    other.seed = [1; 32];
    assert!(matches!(train::train(&spec, &other), Err(Error::Bundle { .. })));
}

#[test]
fn example_specs_are_valid() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    for name in [
        "fashion-mnist-mlp.json",
        "fashion-mnist-cnn.json",
        "char-transformer.json",
        "gpt2-tiny.json",
        "gpt2-tiny-bf16.json",
        "llama-tiny.json",
    ] {
        ergon_engine::load_spec(&examples.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

/// The real thing: the Fashion-MNIST MLP example (Debian's dataset-fashion-mnist, installed by
/// scripts/setup.sh) reaches at least 80 % test accuracy after one epoch.
#[test]
fn fashion_mnist_mlp_reaches_80_percent_in_one_epoch() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let spec = ergon_engine::load_spec(&examples.join("fashion-mnist-mlp.json"))
        .expect("Fashion-MNIST is installed (scripts/setup.sh installs dataset-fashion-mnist)");
    assert_eq!(spec.epochs, 1);
    let dir = tempfile::tempdir().unwrap();
    let r = finished(train::train(&spec, &options(dir.path().join("fm"), None)).unwrap());
    let acc = r.manifest.metrics.validation_accuracy;
    assert!(acc >= 0.80, "test accuracy {acc}");
}

/// The dataset cache keeps what its budget allows: the dataset used least recently goes first, a
/// hit refreshes an entry, and the one just loaded always stays.
#[test]
fn the_dataset_cache_evicts_the_least_recently_used_past_its_budget() {
    use ergon_engine::data::DatasetCache;
    let dir = tempfile::tempdir().unwrap();
    // Three files of the same shape and different bytes (so different content roots).
    let csv = |name: &str, rows: u32| {
        let text: String = (0..rows)
            .map(|i| format!("{},{i},1,2,{}\n", i % 3, name.len() + name.as_bytes()[0] as usize))
            .collect();
        let format = DataFormat::Csv { features: 4, classes: 3 };
        dataset(dir.path(), name, format, text.as_bytes(), rows as u64)
    };
    // 100 samples of 4 features and a label: 2 000 bytes each.
    let (a, b, c) = (csv("a.csv", 100), csv("b.csv", 100), csv("c.csv", 100));
    let cache = DatasetCache::with_budget(4_000);
    let first = cache.get_or_load(&a, "a").unwrap();
    assert_eq!((cache.len(), cache.bytes()), (1, 2_000));
    cache.get_or_load(&b, "b").unwrap();
    // `a` is used again: `b` is now the least recently used.
    assert!(std::sync::Arc::ptr_eq(&first, &cache.get_or_load(&a, "a").unwrap()));
    cache.get_or_load(&c, "c").unwrap();
    assert_eq!((cache.len(), cache.bytes()), (2, 4_000));
    assert!(std::sync::Arc::ptr_eq(&first, &cache.get_or_load(&a, "a").unwrap()), "a kept");
    // `b` was evicted: loading it again evicts `c`, the least recently used now.
    cache.get_or_load(&b, "b").unwrap();
    assert_eq!(cache.len(), 2);
    // A dataset larger than the whole budget is still kept alone (it is in use).
    let tiny = DatasetCache::with_budget(10);
    tiny.get_or_load(&a, "a").unwrap();
    assert_eq!(tiny.len(), 1);
    tiny.get_or_load(&b, "b").unwrap();
    assert_eq!((tiny.len(), tiny.bytes()), (1, 2_000));
}
