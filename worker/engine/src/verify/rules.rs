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

/// The parameters of a checkpoint (weights only).
pub(super) fn checkpoint_weights(host: &HostTensors) -> full_pass::Weights {
    host.0
        .iter()
        .filter(|(n, _)| n.starts_with("param."))
        .map(|(n, (_, v))| (n.clone(), v.clone()))
        .collect()
}

/// The trainable weights of Init(`seed`) for `spec` (with LoRA: the adapters over the frozen
/// `base`).
pub(super) fn init_weights(
    spec: &JobSpec,
    seed: &Seed,
    device: &Device,
    base: Option<&crate::weights::InitialWeights>,
) -> Result<full_pass::Weights> {
    let base = base.filter(|_| spec.adapters != ergon_job_spec::Adapters::None);
    let model = Model::initial(spec, seed, base, device, DType::F32)?;
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

/// Runs the six full-pass rules over every checkpoint of the bundle.
pub(super) fn full_pass_rules(b: &Bundle, r: &mut Replayer) -> Result<Vec<Check>> {
    let (spec, checkpoints, m, seed) = (b.spec, &b.checkpoints, b.manifest, &b.seed);
    let (picks, grid) = &b.chosen.rules_sample;
    let (model, device) = (&r.model, r.device);
    let val_set = r.data.validation();
    let mut chain = Vec::new();
    let mut evenly = Vec::new();
    let mut accuracies = Vec::new();
    let mut c0 = None;
    // The rules look at a sample of the chain drawn from the challenge (first and last included):
    // reading and evaluating every checkpoint of a long chain would cost more than the replay.
    for &i in picks {
        let entry = &m.checkpoints[i];
        // The files and weights checks passed: every sampled checkpoint's weights are readable
        // and match their hashes. The rules read weights only, never the optimizer state.
        let host = checkpoints.take_weights(entry)?;
        let weights = checkpoint_weights(&host);
        trajectory::load_weights(&checkpoints.dir.join(&entry.file), &host, model)?;
        accuracies
            .push(trajectory::evaluate_first(model, val_set, device, RULE_VALIDATION_SAMPLES)?.1);
        let flat = full_pass::flatten(&weights);
        if grid.contains(&i) {
            evenly.push(flat.clone());
        }
        chain.push(flat);
        c0.get_or_insert(weights);
    }
    let c0 = c0.unwrap_or_default();
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
            full_pass::initial_independence(&c0),
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
        .map(full_pass::flatten)
        .collect::<Vec<_>>();
    let (first, last) =
        (chain.first().cloned().unwrap_or_default(), chain.last().cloned().unwrap_or_default());
    Ok(vec![
        full_pass::accuracy_monotone(&accuracies),
        full_pass::continuity(&evenly),
        full_pass::initial_distribution(&c0, &reference),
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
