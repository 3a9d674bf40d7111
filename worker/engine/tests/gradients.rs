//! The spec's `gradients` block: accumulation over micro-batches trains what the whole batch trains
//! (within f32 rounding) and replays exactly; global-norm clipping bounds every step, and a trainer
//! who skips it fails the replay; weight decay reaches only the parameters its scope names.

mod common;

use std::path::Path;

use candle_core::{DType, Device};
use ergon_engine::{
    bundle::{HostTensors, Manifest, MANIFEST_FILE},
    data::hex,
    model::Model,
    optim::{self, Optimizer},
    train::{self, Outcome, TrainOptions},
    trajectory,
    verify::{self, VerifyOptions},
};
use ergon_job_spec::{DecayScope, Gradients, JobSpec, Optimizer as OptimizerSpec, Ppb};

const SEED: [u8; 32] = [9; 32];

fn train(spec: &JobSpec, out: &Path) {
    match train::train(spec, &TrainOptions::new(out.into(), SEED)).expect("training works") {
        Outcome::Finished(_) => {}
        Outcome::Halted(_) => unreachable!("no halt requested"),
    }
}

fn manifest(out: &Path) -> Manifest {
    serde_json::from_slice(&std::fs::read(out.join(MANIFEST_FILE)).unwrap()).unwrap()
}

/// Every segment replayed.
fn verify_all(spec: &JobSpec, out: &Path) -> verify::Report {
    let mut opts = VerifyOptions::new(out.into(), SEED);
    opts.segments = (0..manifest(out).checkpoints.len() as u32 - 1).collect();
    verify::verify(spec, &opts).unwrap()
}

/// The `param.` tensors of checkpoint `index`, flattened in name order.
fn weights(out: &Path, index: usize) -> Vec<f32> {
    let m = manifest(out);
    let host = HostTensors::read(&out.join(&m.checkpoints[index].file)).unwrap();
    host.0
        .iter()
        .filter(|(n, _)| n.starts_with("param."))
        .flat_map(|(_, (_, v))| v.clone())
        .collect()
}

fn with_gradients(spec: &JobSpec, gradients: Gradients) -> JobSpec {
    let mut s = spec.clone();
    s.gradients = gradients;
    s.validate().expect("a valid spec");
    s
}

/// Five micro-batches of 2 samples train, within f32 rounding, what whole batches of 10 train —
/// the step's gradient is the samples' mean either way — and the accumulated bundle replays
/// exactly. An epoch's last batch (3 samples here) takes micro-batches of 2 and 1.
#[test]
fn micro_batches_train_what_the_whole_batch_trains_and_replay_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let mut base = common::text_spec(dir.path());
    base.batch_size = 10;
    assert_eq!(base.train.samples % 10, 3, "a shorter last batch");
    let whole = dir.path().join("whole");
    train(&base, &whole);
    let split = with_gradients(&base, Gradients { micro_batches: 5, ..Gradients::default() });
    let accumulated = dir.path().join("accumulated");
    train(&split, &accumulated);

    let (a, b) = (manifest(&whole), manifest(&accumulated));
    for (x, y) in a.losses.iter().zip(&b.losses) {
        assert!((x - y).abs() <= 1e-5 * x.abs(), "losses {x} and {y}");
    }
    // AdamW divides by √v: a coordinate whose gradient is a rounding away from 0 may step either
    // way, so the runs are compared by how far apart they end against how far they went.
    let last = a.checkpoints.len() - 1;
    let (w0, wa, wb) = (weights(&whole, 0), weights(&whole, last), weights(&accumulated, last));
    let norm = |d: &mut dyn Iterator<Item = f32>| d.map(|v| v * v).sum::<f32>().sqrt();
    let apart = norm(&mut wa.iter().zip(&wb).map(|(x, y)| x - y));
    let travelled = norm(&mut wa.iter().zip(&w0).map(|(x, y)| x - y));
    eprintln!("apart {apart}, travelled {travelled}");
    assert!(apart < 5e-3 * travelled, "final weights {apart} apart after travelling {travelled}");

    let report = verify_all(&split, &accumulated);
    assert!(report.passed, "{:#?}", report.checks);
}

/// SGD without momentum under a clipping norm: no step moves the weights farther than lr × norm;
/// the bundle verifies; a trainer who skips the clipping and claims the spec fails the replay.
#[test]
fn clipping_bounds_every_step_and_skipping_it_fails_replay() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = common::text_spec(dir.path());
    let (lr, clip) = (0.1f32, 0.05f32);
    spec.optimizer =
        OptimizerSpec::Sgd { lr: Ppb(100_000_000), momentum: Ppb(0), weight_decay: Ppb(0) };
    spec.checkpoint_interval = 1;
    let clipped = Gradients { clip_norm: Some(Ppb(50_000_000)), ..Gradients::default() };
    let spec = with_gradients(&spec, clipped);
    let out = dir.path().join("clipped");
    train(&spec, &out);
    let steps = manifest(&out).checkpoints.len() - 1;
    for i in 0..steps {
        let (before, after) = (weights(&out, i), weights(&out, i + 1));
        let moved = before.iter().zip(&after).map(|(x, y)| (x - y) * (x - y)).sum::<f32>().sqrt();
        assert!(moved <= lr * clip * 1.001, "step {i} moved the weights {moved}");
        assert!(moved > 0.0, "step {i} moved nothing");
    }
    let report = verify_all(&spec, &out);
    assert!(report.passed, "{:#?}", report.checks);

    // The forger trains without clipping (its gradients' norms are above 0.05 at every step, so
    // every step differs) and claims the clipped spec.
    let unclipped = with_gradients(&spec, Gradients::default());
    let forged = dir.path().join("forged");
    train(&unclipped, &forged);
    let manifest_path = forged.join(MANIFEST_FILE);
    let mut m = manifest(&forged);
    m.spec_hash = hex(&trajectory::spec_hash(&spec));
    std::fs::write(&manifest_path, m.to_bytes().unwrap()).unwrap();
    let report = verify_all(&spec, &forged);
    assert!(!report.passed);
    let replays = report.checks.iter().filter(|c| c.name.starts_with("replay["));
    assert!(
        replays.clone().count() > 0 && replays.clone().all(|c| !c.passed),
        "{:#?}",
        report.checks
    );
}

/// The clipping factor is `min(1, max / (N + 1e-6))` over the global norm `N` of every gradient.
#[test]
fn the_clip_factor_takes_the_global_norm() {
    let g = |v: &[f32]| Some(candle_core::Tensor::new(v, &Device::Cpu).unwrap());
    // N = √(3² + 4² + 12²) = 13; an absent gradient counts 0.
    let grads = [g(&[3.0, 4.0]), None, g(&[12.0])];
    let factor = |max: f64| optim::clip_factor(&grads, max).unwrap().to_scalar::<f32>().unwrap();
    assert!((factor(1.0) - 1.0 / 13.0).abs() < 1e-7);
    assert!((factor(6.5) - 0.5).abs() < 1e-7);
    // At the norm itself the 10⁻⁶ leaves the factor a rounding under 1 (as in PyTorch).
    assert!(factor(13.0) <= 1.0 && factor(13.0) > 0.999_999);
    assert_eq!(factor(100.0), 1.0, "never scaled up");
}

/// With zero gradients an AdamW step is its weight decay alone: in scope `Matrices` the matrices
/// and embeddings shrink by `1 − lr·λ`, biases and norm gains keep their values; in scope `All`
/// everything shrinks.
#[test]
fn decay_reaches_only_the_parameters_its_scope_names() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = common::text_spec(dir.path());
    spec.optimizer = OptimizerSpec::AdamW {
        lr: Ppb(100_000_000),
        beta1: Ppb(900_000_000),
        beta2: Ppb(990_000_000),
        eps: Ppb(10),
        weight_decay: Ppb(500_000_000),
    };
    let keep = 1.0 - 0.1 * 0.5;
    for scope in [DecayScope::Matrices, DecayScope::All] {
        let spec = with_gradients(&spec, Gradients { decay: scope, ..Gradients::default() });
        let model = Model::new(&spec, &SEED, &Device::Cpu, DType::F32).unwrap();
        let before: Vec<Vec<f32>> = model
            .params
            .iter()
            .map(|p| p.var.as_tensor().flatten_all().unwrap().to_vec1().unwrap())
            .collect();
        let mut opt = Optimizer::new(&spec, &model.params).unwrap();
        opt.step(&model.params, &vec![None; model.params.len()]).unwrap();
        let (mut decayed, mut kept) = (0, 0);
        for (p, old) in model.params.iter().zip(&before) {
            let new: Vec<f32> = p.var.as_tensor().flatten_all().unwrap().to_vec1().unwrap();
            let shrinks = scope == DecayScope::All || p.var.as_tensor().rank() >= 2;
            for (x, y) in old.iter().zip(&new) {
                let want = if shrinks { x * keep } else { *x };
                assert!((y - want).abs() <= 1e-6 * x.abs().max(1e-6), "{} {x} → {y}", p.name);
            }
            if shrinks {
                decayed += 1;
            } else {
                kept += 1;
            }
        }
        assert!(decayed > 0);
        assert_eq!(kept > 0, scope == DecayScope::Matrices, "biases and gains keep theirs");
    }
}
