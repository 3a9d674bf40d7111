//! The full-pass rules on the bundle's sampled checkpoints ([`super::full_pass`]), and the sanity of
//! every state read.

use std::collections::BTreeMap;

use candle_core::{DType, Device};
use ergon_job_spec::JobSpec;
use sha2::{Digest, Sha256};

use super::checks::{Bundle, Replayer};
use super::full_pass;
use super::*;
use crate::{bundle::HostTensors, error::Result, model::Model, rng::Seed, trajectory};

/// Fresh initializations rule 6 compares the final model with.
pub const RULE_RANDOM_INITS: usize = 3;

/// The trainable weights of Init(`seed`) for `spec` (with LoRA: the adapters over the frozen
/// `base`).
pub(super) fn init_weights(
    spec: &JobSpec,
    seed: &Seed,
    device: &Device,
    base: Option<&crate::weights::InitialWeights>,
) -> Result<full_pass::Weights> {
    let base = base.filter(|_| spec.adapters != ergon_job_spec::Adapters::None);
    model_weights(&Model::initial(spec, seed, base, device, DType::F32)?)
}

/// The trainable weights of `model`, named as a checkpoint names them (`param.<name>`).
pub(super) fn model_weights(model: &Model) -> Result<full_pass::Weights> {
    let mut out = BTreeMap::new();
    for p in &model.params {
        out.insert(format!("param.{}", p.name), p.var.as_tensor().flatten_all()?.to_vec1::<f32>()?);
    }
    Ok(out)
}

/// A seed derived from `seed` for reference draws, never the training seed itself.
pub(super) fn derived_seed(seed: &Seed, label: &str) -> Seed {
    Sha256::new()
        .chain_update(b"ergon/verify/")
        .chain_update(label)
        .chain_update(seed)
        .finalize()
        .into()
}

/// Runs the six full-pass rules on the rules' sample of checkpoints. `c0` is C0 as the verifier
/// computed it (Init: the `init` check holds the bundle's C0 to it bit for bit), and `r.model`
/// still holds it.
///
/// What each rule reads (so that a vote reads no checkpoint whole for the rules alone): the
/// distance rules (2, 5, 6) compare the rules' coordinate sample ([`super::sample::CoordinateSample`]) of each
/// checkpoint of the sample — taken from the checkpoints the verifier holds whole (C0, the
/// replayed segments' starts, the last) or read by chunks; the accuracy rule (1) evaluates the
/// checkpoints held whole, in order; the rules about C0 (3, 4) read C0 whole.
pub(super) fn full_pass_rules(
    b: &Bundle,
    r: &mut Replayer,
    c0: &full_pass::Weights,
) -> Result<Vec<Check>> {
    let (spec, checkpoints, m, seed) = (b.spec, &b.checkpoints, b.manifest, &b.seed);
    let (picks, grid) = &b.chosen.rules_sample;
    let coordinates = &b.coordinates;
    let (model, device) = (&r.model, r.device);
    let val_set = r.data.validation();
    // Rule 1 on C0 (the model as it is), then each checkpoint read whole, in order.
    // Each is read once: its coordinates are kept for the distance rules.
    let mut accuracies =
        vec![trajectory::evaluate_first(model, val_set, device, RULE_VALIDATION_SAMPLES)?.1];
    let mut held = BTreeMap::new();
    // At most `RULE_CHECKPOINTS` evaluations in all, what the chain pays for (`overhead`): a
    // dispute's seat holding more starts evaluates the first of them and the last checkpoint.
    let whole: Vec<usize> = b.chosen.read.iter().copied().filter(|i| *i != 0).collect();
    let evaluated = whole
        .iter()
        .enumerate()
        .filter(|(k, _)| *k + 2 < RULE_CHECKPOINTS || *k + 1 == whole.len());
    for (_, &i) in evaluated {
        let entry = &m.checkpoints[i];
        let host = checkpoints.tensors(entry)?;
        trajectory::load_weights(&checkpoints.dir.join(&entry.file), &host, model)?;
        accuracies
            .push(trajectory::evaluate_first(model, val_set, device, RULE_VALIDATION_SAMPLES)?.1);
        if picks.contains(&i) {
            held.insert(i, coordinates.of_host(&host));
        }
    }
    // The coordinates of each checkpoint of the sample (first and last included), drawn from the
    // challenge: a forger committing its bundle cannot know which checkpoints, nor which chunks.
    let mut chain = Vec::new();
    let mut evenly = Vec::new();
    for &i in picks {
        let entry = &m.checkpoints[i];
        let values = if i == 0 {
            coordinates.of_weights(c0)
        } else if let Some(values) = held.remove(&i) {
            values
        } else {
            match checkpoints.take_sample(entry) {
                Some(kept) => std::rc::Rc::unwrap_or_clone(kept),
                None => std::rc::Rc::unwrap_or_clone(checkpoints.sample(entry, coordinates)?),
            }
        };
        if grid.contains(&i) {
            evenly.push(values.clone());
        }
        chain.push(values);
    }
    // Rules 3 and 4 judge C0 as a random draw. A fine-tune's C0 is the committed weights file
    // instead (checked bit for bit by `init`): its distribution is compared with the file's, and
    // a trained base has no reason to look independent.
    let lora = spec.adapters != ergon_job_spec::Adapters::None;
    let (reference, independence) = match r.data.weights() {
        Some(file) if !lora => (
            Model::layout(spec)?
                .into_iter()
                .filter_map(|(name, _)| {
                    file.get(&name).map(|(_, values)| (format!("param.{name}"), values.clone()))
                })
                .collect(),
            Check {
                name: "initial_independence".into(),
                passed: true,
                measured: "C0 is the committed weights file, not a random draw".into(),
                threshold: "not applicable (init compares C0 with the file bit for bit)".into(),
            },
        ),
        // Drawn from the seed: every parameter, or LoRA's adapters over the frozen base.
        base => (
            init_weights(spec, &derived_seed(seed, "reference"), device, base)?,
            full_pass::initial_independence(c0),
        ),
    };
    let randoms = (0..RULE_RANDOM_INITS)
        .map(|k| {
            init_weights(
                spec,
                &derived_seed(seed, &format!("random-{k}")),
                device,
                r.data.weights(),
            )
        })
        .collect::<Result<Vec<_>>>()?
        .iter()
        .map(|w| coordinates.of_weights(w))
        .collect::<Vec<_>>();
    let (first, last) =
        (chain.first().cloned().unwrap_or_default(), chain.last().cloned().unwrap_or_default());
    Ok(vec![
        full_pass::accuracy_monotone(&accuracies),
        full_pass::continuity(&evenly),
        full_pass::initial_distribution(c0, &reference),
        independence,
        full_pass::distance_monotone(&chain),
        full_pass::init_final_distance(&first, &last, &randoms),
    ])
}

/// What is wrong with a checkpoint's state: non-finite values anywhere (weights or optimizer
/// state), or every weight zero. Empty when the state is sane.
pub fn state_defects(step: u64, host: &HostTensors) -> Vec<String> {
    let mut defects = Vec::new();
    for (name, (_, values)) in &host.0 {
        if let Some(bad) = values.iter().find(|v| !v.is_finite()) {
            defects.push(format!("step {step}: {name} holds {bad}"));
        }
    }
    let mut weights = host.0.iter().filter(|(n, _)| n.starts_with("param.")).peekable();
    if weights.peek().is_none() {
        defects.push(format!("step {step}: no weights"));
    } else if weights.all(|(_, (_, values))| values.iter().all(|v| *v == 0.0)) {
        defects.push(format!("step {step}: every weight is zero"));
    }
    defects
}
