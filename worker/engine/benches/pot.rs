//! Proof-of-Training benchmark (run by `scripts/bench-pot.sh`): detection rate of every forger of the
//! attack suite, false-positive rate on honest bundles, which checks caught what, what the six
//! full-pass rules alone catch, and verification time as a fraction of honest training time.
//!
//! Usage: `pot [SAMPLES] [SEGMENTS]` (defaults 20 and 4). The task is a synthetic CSV classification
//! (4 000 samples, 20 features, 5 classes; MLP 20→64→5, batch 32, 6 epochs = 750 steps, a checkpoint
//! every 10 steps = 75 segments), generated in a temp directory. Honest bundles are trained on pools
//! of 1 and 2 threads alternately (the verifier runs on one thread). The forgeries of AdamW's state
//! run on the same task trained with AdamW ([`adamw`]), whose honest bundles are checked too (false
//! rejections, and the smallest update-direction RMS the optimizer check saw against its floor).

use std::{collections::BTreeMap, path::Path, time::Instant};

use ergon_engine::{
    attacks::{forge, Attack},
    data,
    train::{self, TrainOptions},
    verify::{self, Report, VerifyOptions},
    Threads,
};
use ergon_job_spec::{
    Bounded, BoundedString, DataFormat, Dataset, Hash32, JobSpec, Layer, Model, Optimizer, Ppb,
};

fn task(dir: &Path) -> JobSpec {
    let (samples, features, classes) = (4_000u32, 20u32, 5u32);
    let mut text = String::new();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x >> 11) as f64 / (1u64 << 53) as f64 - 0.5
    };
    for i in 0..samples {
        let class = i % classes;
        let row: Vec<String> = (0..features)
            .map(|f| {
                let signal = if f % classes == class { 1.0 } else { 0.0 };
                format!("{:.4}", signal + next())
            })
            .collect();
        text.push_str(&format!("{class},{}\n", row.join(",")));
    }
    let path = dir.join("task.csv");
    std::fs::write(&path, &text).unwrap();
    let dataset = Dataset {
        format: DataFormat::Csv { features, classes },
        files: Bounded::new(vec![BoundedString::from_str(path.to_str().unwrap()).unwrap()])
            .unwrap(),
        content_root: Hash32(data::content_root([text.as_bytes()])),
        samples: samples as u64,
    };
    JobSpec {
        model: Model {
            layers: Bounded::new(vec![
                Layer::Linear { in_features: features, out_features: 64, bias: true },
                Layer::ReLU,
                Layer::Linear { in_features: 64, out_features: classes, bias: true },
            ])
            .unwrap(),
        },
        train: dataset.clone(),
        validation: dataset,
        optimizer: Optimizer::Sgd {
            lr: Ppb(20_000_000),
            momentum: Ppb(900_000_000),
            weight_decay: Ppb(0),
        },
        init: Default::default(),
        schedule: Default::default(),
        adapters: Default::default(),
        gradients: Default::default(),
        epochs: 6,
        batch_size: 32,
        checkpoint_interval: 10,
        precision: Default::default(),
    }
}

/// The task trained with AdamW (lr 10⁻³, β = (0.9, 0.999), ε = 10⁻⁸, weight decay 0.01).
fn adamw(spec: &JobSpec) -> JobSpec {
    let mut adamw = spec.clone();
    adamw.optimizer = Optimizer::AdamW {
        lr: Ppb(1_000_000),
        beta1: Ppb(900_000_000),
        beta2: Ppb(999_000_000),
        eps: Ppb(10),
        weight_decay: Ppb(10_000_000),
    };
    adamw
}

/// The smallest root mean square of AdamW's update direction over every checkpoint after C0 of
/// `bundle` (what the verifier's optimizer check holds against `MIN_ADAM_STEP_RATIO`).
fn smallest_step_ratio(spec: &JobSpec, bundle: &Path) -> f64 {
    use ergon_engine::bundle::HostTensors;
    let inspection = ergon_engine::bundle::inspect(bundle).unwrap();
    let mut smallest = f64::INFINITY;
    for entry in inspection.manifest.checkpoints.iter().filter(|e| e.step > 0) {
        let host = HostTensors::read(&bundle.join(&entry.file)).unwrap();
        if let Some(ratio) = verify::checkpoint_step_ratio(&spec.optimizer, entry.step, &host) {
            smallest = smallest.min(ratio);
        }
    }
    smallest
}

fn seed(i: u64) -> [u8; 32] {
    let mut s = [0u8; 32];
    s[..8].copy_from_slice(&i.to_le_bytes());
    s[31] = 0xe7;
    s
}

/// A training of `spec` into `out` under `seed` on a pool of `threads` threads (wall time, data
/// loading and checkpoint writes included, as for the forgers and the verifier).
fn train_on(spec: &JobSpec, out: &Path, seed: [u8; 32], threads: usize) {
    let opts = TrainOptions {
        threads: Some(Threads::new(threads).unwrap()),
        ..TrainOptions::new(out.into(), seed)
    };
    assert!(matches!(train::train(spec, &opts).unwrap(), train::Outcome::Finished(_)));
}

/// The verifier runs on one thread: on a model this small a second thread costs more in
/// synchronization than it saves. Replays are bit-exact across thread counts
/// (docs/pot-calibration.md).
fn options(bundle: &Path, seed: [u8; 32], challenge: u64, segments: u32) -> VerifyOptions {
    let mut o = VerifyOptions::new(bundle.into(), seed);
    o.threads = Some(Threads::new(1).unwrap());
    o.challenge = challenge.to_le_bytes().to_vec();
    o.segment_count = segments;
    o
}

fn rules_only(mut o: VerifyOptions) -> VerifyOptions {
    o.replay = false;
    o
}

/// The chain draws `Verifiers` = 3 per regular round, each replaying `segments`.
const VERIFIERS: f64 = 3.0;

/// For each segment `report` sketched: whether the sketches of a straight line between its two
/// checkpoints (all a verifier has without replaying) disagree with the replay's, and whether those
/// of a verifier that replays up to the last probe step but one and guesses the last on the straight
/// line do. Returns (blind disagreeing, partial disagreeing, sketched).
fn blind_guesses(bundle: &Path, report: &Report) -> (u32, u32, u32) {
    use ergon_engine::bundle::{HostTensors, Manifest, MANIFEST_FILE};
    let manifest: Manifest =
        serde_json::from_slice(&std::fs::read(bundle.join(MANIFEST_FILE)).unwrap()).unwrap();
    let root = ergon_engine::bundle::parse_hash(report.root.as_deref().unwrap_or_default())
        .expect("a report of a readable bundle has its root");
    let weights = |i: usize| -> Vec<f32> {
        let host = HostTensors::read(&bundle.join(&manifest.checkpoints[i].file)).unwrap();
        verify::checkpoint_evidence_weights(&host)
    };
    let (mut wrong, mut partial_wrong) = (0, 0);
    for s in &report.sketches {
        let i = s.segment as usize;
        let (from, to) = (manifest.checkpoints[i].step, manifest.checkpoints[i + 1].step);
        let key = ergon_protocol::evidence::key(&root, s.segment);
        let (start, end) = (weights(i), weights(i + 1));
        let blind = verify::Sketcher::new(&key, (from, to), &start).guess_straight(&end);
        let replayed = s.sketches();
        if !ergon_protocol::evidence::agree_all(&replayed, &blind) {
            wrong += 1;
        }
        let mut partial = replayed.clone();
        if let (Some(last), Some(guessed)) = (partial.last_mut(), blind.last()) {
            *last = *guessed;
        }
        if !ergon_protocol::evidence::agree_all(&replayed, &partial) {
            partial_wrong += 1;
        }
    }
    (wrong, partial_wrong, report.sketches.len() as u32)
}

fn failed_checks(r: &Report) -> Vec<String> {
    r.checks
        .iter()
        .filter(|c| !c.passed)
        .map(|c| c.name.split('[').next().unwrap_or_default().to_string())
        .collect()
}

fn main() {
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    let samples: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(20);
    let segments: u32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(4);
    if samples == 0 {
        // Only the lazy-trainer table: the chain's draw, no training.
        lazy_trainer_table(VERIFIERS as u32, segments);
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let spec = task(dir.path());
    let summary = spec.validate().unwrap();
    println!(
        "task: {} parameters, {} steps, {} checkpoints; {samples} bundles per row, {segments} segments replayed",
        summary.parameters, summary.total_steps, summary.checkpoints
    );

    // Honest bundles: training time, verification time, false positives, replay agreement.
    let (mut train_s, mut verify_s) = (0.0, 0.0);
    // Training and verification time of the single-threaded runs: like for like.
    let (mut train_1, mut verify_1) = (0.0, 0.0);
    let (mut fp, mut fp_rules) = (0, 0);
    let mut worst = (0f64, 1f64); // largest relative error, smallest cosine
                                  // Replay evidence: sketches a straight-line guess (a verifier that did not replay) gets wrong.
    let (mut blind_wrong, mut partial_wrong, mut sketched) = (0u32, 0u32, 0u32);
    for i in 0..samples {
        let out = dir.path().join(format!("honest-{i}"));
        let threads = 1 + i % 2;
        let t = Instant::now();
        train_on(&spec, &out, seed(i), threads as usize);
        // Wall time, data loading and checkpoint writes included, as for the forgers and the
        // verifier below.
        let trained = t.elapsed().as_secs_f64();
        train_s += trained;
        let t = Instant::now();
        let report = verify::verify(&spec, &options(&out, seed(i), i, segments)).unwrap();
        let verified = t.elapsed().as_secs_f64();
        verify_s += verified;
        if threads == 1 {
            (train_1, verify_1) = (train_1 + trained, verify_1 + verified);
        }
        if !report.passed {
            fp += 1;
            let why: Vec<String> = report
                .checks
                .iter()
                .filter(|c| !c.passed)
                .map(|c| format!("{}: {}", c.name, c.measured))
                .collect();
            eprintln!("honest {i} rejected: {why:?}");
        }
        for c in report.checks.iter().filter(|c| c.name.starts_with("replay")) {
            // "steps a..b: relative error R, cosine C, …"
            let num = |key: &str| -> f64 {
                c.measured
                    .split(key)
                    .nth(1)
                    .and_then(|s| s.split([',', ' ']).find(|t| !t.is_empty()))
                    .and_then(|t| t.parse().ok())
                    .unwrap_or(f64::NAN)
            };
            worst.0 = worst.0.max(num("relative error "));
            worst.1 = worst.1.min(num("cosine "));
        }
        let (wrong, partial, total) = blind_guesses(&out, &report);
        (blind_wrong, partial_wrong, sketched) =
            (blind_wrong + wrong, partial_wrong + partial, sketched + total);
        if !verify::verify(&spec, &rules_only(options(&out, seed(i), i, segments))).unwrap().passed
        {
            fp_rules += 1;
        }
        std::fs::remove_dir_all(&out).ok();
    }
    let honest_train = train_s / samples as f64;
    let replayed = segments as u64 * spec.checkpoint_interval as u64;
    println!(
        "\nhonest: {samples} bundles (1 and 2 threads), rejected {fp} (rules alone {fp_rules}); \
         replay: largest relative error {:.2e}, smallest cosine {:.8}\n\
         cost: training {honest_train:.3} s, verification {:.3} s = {:.1}% of training wall time; \
         single-threaded runs only: {:.1}% (fixed costs dominate on a task this small); \
         {replayed} of {} steps replayed = {:.1}%",
        worst.0,
        worst.1,
        verify_s / samples as f64,
        100.0 * verify_s / train_s,
        100.0 * verify_1 / train_1,
        summary.total_steps,
        100.0 * replayed as f64 / summary.total_steps as f64
    );
    println!(
        "replay evidence: a verifier that guesses a straight trajectory instead of replaying \
         sketches {blind_wrong} of {sketched} segments wrong ({:.1}%): each such pass disagrees \
         with the segment's second verifier and the trainer's own; one that replays up to the last \
         probe step but one and guesses the last gets {partial_wrong} of {sketched} wrong ({:.1}%)",
        100.0 * blind_wrong as f64 / sketched.max(1) as f64,
        100.0 * partial_wrong as f64 / sketched.max(1) as f64
    );
    println!(
        "network: {VERIFIERS} verifiers per round = {:.1}% of training wall time per job (one round)",
        VERIFIERS * 100.0 * verify_s / train_s
    );

    println!(
        "\n{:<22} {:>9} {:>9} {:>12} {:>10}  caught by (bundles per failing check)",
        "attack", "detected", "rate", "rules alone", "work done"
    );
    let adamw_spec = adamw(&spec);
    for attack in Attack::all(summary.checkpoints as usize - 1) {
        let spec = if attack.needs_adamw() { &adamw_spec } else { &spec };
        let (mut detected, mut by_rules, mut cost) = (0, 0, 0.0);
        let mut caught: BTreeMap<String, u32> = BTreeMap::new();
        for v in 0..samples {
            let out = dir.path().join(format!("{}-{v}", attack.name()));
            let s = seed(1_000 + v);
            // A forward-only step is about a third of a training step's work.
            let forgery = forge(attack, spec, &s, &out, v).unwrap();
            cost += forgery.steps as f64 + forgery.forward_only as f64 / 3.0;
            let report = verify::verify(spec, &options(&out, s, 7_000 + v, segments)).unwrap();
            if !report.passed {
                detected += 1;
                for name in
                    failed_checks(&report).into_iter().collect::<std::collections::BTreeSet<_>>()
                {
                    *caught.entry(name).or_default() += 1;
                }
            }
            if !verify::verify(spec, &rules_only(options(&out, s, 7_000 + v, segments)))
                .unwrap()
                .passed
            {
                by_rules += 1;
            }
            std::fs::remove_dir_all(&out).ok();
        }
        let caught: Vec<String> = caught.iter().map(|(k, n)| format!("{k}:{n}")).collect();
        println!(
            "{:<22} {:>5}/{:<3} {:>8.1}% {:>11.1}% {:>9.1}%  {}",
            attack.name(),
            detected,
            samples,
            100.0 * detected as f64 / samples as f64,
            100.0 * by_rules as f64 / samples as f64,
            100.0 * cost / samples as f64 / summary.total_steps as f64,
            caught.join(" ")
        );
    }
    honest_adamw(&adamw_spec, dir.path(), samples, segments);
    lazy_trainer_table(VERIFIERS as u32, segments);
    fashion_mnist_cost(segments);
}

/// Honest AdamW bundles: false rejections (the optimizer check must not fail an honest run) and
/// the smallest update-direction RMS seen, against the check's floor.
fn honest_adamw(spec: &JobSpec, dir: &Path, samples: u64, segments: u32) {
    let (mut rejected, mut smallest) = (0, f64::INFINITY);
    for i in 0..samples {
        let out = dir.join(format!("honest-adamw-{i}"));
        let opts = TrainOptions::new(out.clone(), seed(50_000 + i));
        train::train(spec, &opts).unwrap();
        let report =
            verify::verify(spec, &options(&out, seed(50_000 + i), 9_000 + i, segments)).unwrap();
        if !report.passed {
            rejected += 1;
            println!("  honest AdamW bundle {i} rejected: {:?}", report.first_failure());
        }
        smallest = smallest.min(smallest_step_ratio(spec, &out));
        std::fs::remove_dir_all(&out).ok();
    }
    println!(
        "
honest AdamW: {samples} bundles, rejected {rejected}; smallest update-direction RMS \
         {smallest:.3e} (the optimizer check's floor: {:e})",
        verify::MIN_ADAM_STEP_RATIO
    );
}

/// Verification cost on the Fashion-MNIST MLP example (`worker/examples/fashion-mnist-mlp.json`,
/// Debian's `dataset-fashion-mnist`): three bundles trained on one thread, each
/// verified by a verifier without a dataset cache (it fetches, hashes and decodes 30 MB of data) and
/// by one that holds the datasets from an earlier job (`DatasetCache`), as a fraction of training
/// wall time, per verifier and for the network's 3 verifiers of a regular round.
fn fashion_mnist_cost(segments: u32) {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/fashion-mnist-mlp.json");
    let spec: JobSpec = serde_json::from_str(&std::fs::read_to_string(example).unwrap()).unwrap();
    let first_file = spec.train.files.first().and_then(|f| f.as_str()).unwrap_or_default();
    if !Path::new(first_file).exists() {
        println!("\nFashion-MNIST: skipped ({first_file} missing: scripts/setup.sh installs it)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cache = std::sync::Arc::new(data::DatasetCache::new());
    // Warm the cache as a verifier's earlier job on the same data would have.
    data::JobData::load_with(&spec, Some(&cache)).unwrap();
    let (mut train_s, mut cold_s, mut warm_s) = (0.0, 0.0, 0.0);
    let runs = 3u64;
    for i in 0..runs {
        let out = dir.path().join(format!("fmnist-{i}"));
        let t = Instant::now();
        train_on(&spec, &out, seed(50 + i), 1);
        train_s += t.elapsed().as_secs_f64();
        for warm in [false, true] {
            let mut opts = options(&out, seed(50 + i), 90 + i, segments);
            opts.datasets = warm.then(|| cache.clone());
            let t = Instant::now();
            let report = verify::verify(&spec, &opts).unwrap();
            assert!(report.passed, "{:?}", report.first_failure());
            *(if warm { &mut warm_s } else { &mut cold_s }) += t.elapsed().as_secs_f64();
        }
        std::fs::remove_dir_all(&out).ok();
    }
    let n = runs as f64;
    println!(
        "\nFashion-MNIST MLP ({runs} bundles, {segments} segments replayed, training and verifying \
         on one thread): training {:.2} s; verification without a dataset cache {:.2} s = {:.1}% of \
         training, with the datasets cached {:.2} s = {:.1}%; network (3 verifiers, cached) {:.1}%",
        train_s / n,
        cold_s / n,
        100.0 * cold_s / train_s,
        warm_s / n,
        100.0 * warm_s / train_s,
        3.0 * 100.0 * warm_s / train_s
    );
}

/// What faking `k` of 30 segments risks per job, with the chain's assignment
/// ([`ergon_protocol::segments::assign`]: `Verifiers` verifiers with `SegmentsPerRound` segments
/// each, every segment shared by two of them, so `verifiers × ⌈per_verifier / 2⌉` distinct
/// segments per job; a fail on any of them opens a dispute that replays it again and upholds it): the exact catch probability, the same
/// measured over 100 000 draws from random seeds, and the
/// lazy trainer's expected result against honest work in units of the price `P`, assuming the price
/// just covers the training cost (`C = P`, the least a rational trainer bids) and that every drawn
/// verifier replays (caught: the whole collateral, the price, is slashed and nothing is paid).
fn lazy_trainer_table(verifiers: u32, per_verifier: u32) {
    const SEGMENTS: u32 = 30;
    const DRAWS: u32 = 100_000;
    let per_round = (verifiers * per_verifier.div_ceil(2)).min(SEGMENTS);
    println!(
        "\nlazy trainer, {SEGMENTS} segments, {verifiers} verifiers × {per_verifier}, each segment \
         twice = {per_round} distinct replayed per job (chain assignment), C = P:\n\
         {:>3} {:>12} {:>14} {:>18} {:>14} {:>14}",
        "k", "P(caught)", "measured", "expected loss (P)", "gain (P)", "net (P)"
    );
    for k in [1u32, 3, 10] {
        let exact = ergon_protocol::segments::catch_ppm(SEGMENTS, per_round, k) as f64 / 1e6;
        // The faked segments are the first k (the draw is uniform, so which ones does not matter).
        let hits = (0..DRAWS)
            .filter(|i| {
                let mut seed = [0u8; 32];
                seed[..4].copy_from_slice(&i.to_le_bytes());
                ergon_protocol::segments::assign(&seed, SEGMENTS, verifiers, per_verifier)
                    .iter()
                    .flatten()
                    .any(|s| *s < k)
            })
            .count();
        let measured = hits as f64 / DRAWS as f64;
        // Against honest work: caught, it loses the payment P and the collateral P; it saves k/30
        // of the cost C = P either way.
        let loss = 2.0 * exact;
        let gain = k as f64 / SEGMENTS as f64;
        println!(
            "{k:>3} {:>11.1}% {:>13.1}% {loss:>18.3} {gain:>14.3} {:>14.3}",
            100.0 * exact,
            100.0 * measured,
            gain - loss
        );
    }
}
