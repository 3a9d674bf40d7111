//! A delivered model, as its owner gets it: the final checkpoint of a completed job's bundle,
//! downloaded alone, checked against the root committed on chain, and evaluated on the spec's
//! validation set.

use std::path::Path;

use candle_core::{DType, Device};
use ergon_job_spec::JobSpec;

use crate::{
    bundle::{self, Manifest, MANIFEST_FILE},
    data::{self, hex},
    error::{io, Error, Result},
    model::Model,
    optim::Optimizer,
    trajectory,
};

/// What [`fetch_model`] found.
pub struct Delivered {
    /// The manifest (claimed metrics, environment, losses).
    pub manifest: Manifest,
    /// The step of the final checkpoint.
    pub step: u64,
    /// The final checkpoint's file in the output directory.
    pub file: std::path::PathBuf,
    /// Validation loss measured here.
    pub validation_loss: f32,
    /// Validation accuracy measured here.
    pub validation_accuracy: f32,
}

/// Downloads the manifest and the final checkpoint of the bundle served at `url` into `into`,
/// checks the manifest against the committed `root` and the checkpoint against the manifest, and
/// evaluates the model on `spec`'s validation set.
pub fn fetch_model(spec: &JobSpec, url: &str, root: &[u8; 32], into: &Path) -> Result<Delivered> {
    spec.validate()?;
    let layout = trajectory::layout(spec)?;
    let final_only = |m: &Manifest| m.checkpoints.len().checked_sub(1).into_iter().collect();
    let manifest = bundle::fetch_selected(url, into, final_only, Some(&layout))?;
    let manifest_path = into.join(MANIFEST_FILE);
    let bytes = std::fs::read(&manifest_path).map_err(io("reading", &manifest_path))?;
    let found = bundle::root_of(&bytes)?;
    if &found != root {
        return Err(Error::Bundle {
            path: manifest_path,
            reason: format!("root {} is not the committed {}", hex(&found), hex(root)),
        });
    }
    if manifest.spec_hash != hex(&trajectory::spec_hash(spec)) {
        return Err(Error::Bundle { path: manifest_path, reason: "trained another spec".into() });
    }
    if let Some(step) = manifest.diverged_at {
        return Err(Error::Bundle {
            path: manifest_path,
            reason: format!("the spec diverged at step {step}: there is no trained model"),
        });
    }
    let last = manifest.checkpoints.last().ok_or_else(|| Error::Bundle {
        path: manifest_path.clone(),
        reason: "no checkpoint".into(),
    })?;
    if let Some(problem) = layout.entry_problem(last) {
        return Err(Error::Bundle { path: manifest_path, reason: problem });
    }
    // The digest check ties the weights to the manifest, and so to the root.
    let host = trajectory::read_checkpoint(into, last)?;
    let device = Device::Cpu;
    // A LoRA checkpoint holds the adapters: the model is the frozen base (the spec's weights file)
    // with them.
    let data = data::JobData::load(spec)?;
    let model = Model::initial(spec, &[0; 32], data.weights(), &device, DType::F32)?;
    let mut opt = Optimizer::new(spec, &model.params)?;
    trajectory::load_state(&into.join(&last.file), &host, last.step, &model, &mut opt)?;
    let (validation_loss, validation_accuracy) =
        trajectory::evaluate(&model, data.validation(), &device)?;
    Ok(Delivered {
        step: last.step,
        file: into.join(&last.file),
        manifest,
        validation_loss,
        validation_accuracy,
    })
}

/// Writes the final model of the bundle in `dir` (a trainer's bundle, or what [`fetch_model`]
/// downloaded) into `out` in Hugging Face's layout ([`crate::weights::export_hf`]): the final
/// checkpoint is first checked against the manifest's digests and the spec's layout. Returns the
/// checkpoint's step.
pub fn export_hf(spec: &JobSpec, dir: &Path, out: &Path, tokenizer: Option<&Path>) -> Result<u64> {
    spec.validate()?;
    let layout = trajectory::layout(spec)?;
    let final_only = |m: &Manifest| m.checkpoints.len().checked_sub(1).into_iter().collect();
    let inspection = bundle::inspect_selected(dir, final_only, Some(&layout))?;
    let manifest_path = dir.join(MANIFEST_FILE);
    if inspection.manifest.spec_hash != hex(&trajectory::spec_hash(spec)) {
        return Err(Error::Bundle { path: manifest_path, reason: "trained another spec".into() });
    }
    let last = inspection.manifest.checkpoints.last().ok_or_else(|| Error::Bundle {
        path: manifest_path.clone(),
        reason: "no checkpoint".into(),
    })?;
    let host = match inspection.checkpoints.get(&last.step) {
        Some(host) => host.clone(),
        None => trajectory::read_checkpoint(dir, last)?,
    };
    // The model of the final checkpoint; with LoRA its adapters over the frozen base (fetched and
    // checked by its root), merged into the base's weights for tools that know no adapters.
    let base = match spec.adapters {
        ergon_job_spec::Adapters::None => None,
        ergon_job_spec::Adapters::Lora { .. } => crate::weights::load(spec)?,
    };
    let model = Model::initial(spec, &[0; 32], base.as_ref(), &Device::Cpu, DType::F32)?;
    let mut opt = Optimizer::new(spec, &model.params)?;
    trajectory::load_state(&dir.join(&last.file), &host, last.step, &model, &mut opt)?;
    let params = model.merged_base()?;
    crate::weights::export_hf(spec, &params, out, tokenizer)?;
    Ok(last.step)
}
