//! Initial weights from a file (fine-tuning, or continuing an earlier job): fetched, checked against
//! the content root the spec commits to, read as safetensors and matched to the model's parameters
//! under the spec's [`WeightNaming`] — every parameter present with its shape, nothing left over —
//! before a step is trained. The trainer's C0 and the verifier's `init` check are built from the
//! same [`InitialWeights`], so C0 equals the file bit for bit.
//!
//! The other way, [`export_hf`] writes a model in Hugging Face's layout (`config.json`,
//! `model.safetensors`) for `transformers` to load without Ergon.

pub mod fine_tune;
pub mod hf_config;
pub mod hf_gpt2;
pub mod hf_llama;

use std::{collections::BTreeMap, path::Path};

use ergon_job_spec::{InitialWeights as Init, JobSpec, WeightNaming};
use safetensors::{tensor::TensorView, Dtype, SafeTensors};

use crate::{
    bundle::HostTensors,
    data,
    error::{Error, Result},
    model::Model,
};

/// Tensors by name, each its shape and f32 values (row-major).
pub type NamedTensors = BTreeMap<String, (Vec<usize>, Vec<f32>)>;

/// C0's parameters read from a weights file, by Ergon parameter name: each its shape (the model's)
/// and f32 values, row-major.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct InitialWeights {
    tensors: BTreeMap<String, (Vec<usize>, Vec<f32>)>,
}

impl InitialWeights {
    /// Parameter `name`'s initial shape and values.
    pub fn get(&self, name: &str) -> Option<&(Vec<usize>, Vec<f32>)> {
        self.tensors.get(name)
    }

    /// Parameters held.
    pub fn len(&self) -> usize {
        self.tensors.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.tensors.is_empty()
    }
}

fn bad(file: &str, reason: impl Into<String>) -> Error {
    Error::Data { file: file.to_string(), reason: reason.into() }
}

/// `spec`'s initial weights: `None` when they come from the seed, else fetched from the spec's
/// file, its content root checked before a byte is parsed, and matched to the model.
pub fn load(spec: &JobSpec) -> Result<Option<InitialWeights>> {
    let Init::Safetensors { file, content_root, naming } = &spec.init else {
        return Ok(None);
    };
    let fetched =
        data::fetch_committed(core::slice::from_ref(file), content_root, data::SET_NAMES[2])?;
    let (uri, bytes) = &fetched[0];
    from_safetensors(spec, *naming, uri, bytes).map(Some)
}

/// Where an Ergon parameter lives in a weights file: its name (without the naming's prefix;
/// `lm_head.weight` is never prefixed) and whether it is stored transposed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HfName {
    /// The tensor's name.
    pub name: String,
    /// Stored `[in, out]` (GPT-2's `Conv1D`).
    pub transposed: bool,
}

/// The file's name and storage of Ergon parameter `param` under `naming`.
fn file_name(spec: &JobSpec, naming: WeightNaming, param: &str) -> Option<HfName> {
    match naming {
        WeightNaming::Ergon => Some(HfName { name: param.to_string(), transposed: false }),
        WeightNaming::HfGpt2 => hf_gpt2::name(spec, param),
        WeightNaming::HfLlama => hf_llama::name(spec, param),
    }
}

/// The prefix of the base model's tensors under `naming` (`param.` in an Ergon checkpoint,
/// `transformer.` in a `GPT2LMHeadModel`, `model.` in a `LlamaForCausalLM`).
fn prefix(naming: WeightNaming) -> &'static str {
    match naming {
        WeightNaming::Ergon => "param.",
        WeightNaming::HfGpt2 => hf_gpt2::PREFIX,
        WeightNaming::HfLlama => hf_llama::PREFIX,
    }
}

/// The names under which a file may hold a tensor called `name` by its naming: the plain name and
/// its prefixed form.
fn spellings(naming: WeightNaming, name: &str) -> [String; 2] {
    [name.to_string(), format!("{}{name}", prefix(naming))]
}

/// Tensors of a file that are no parameters and may be left unread.
fn ignorable(naming: WeightNaming, name: &str) -> bool {
    match naming {
        WeightNaming::Ergon => name.starts_with("opt."),
        WeightNaming::HfGpt2 => hf_gpt2::is_buffer(name),
        WeightNaming::HfLlama => hf_llama::is_buffer(name),
    }
}

/// The Hugging Face naming `spec`'s model exports to, if any.
pub fn hf_naming(spec: &JobSpec) -> Option<WeightNaming> {
    let layers = spec.model.layers.as_slice();
    if ergon_job_spec::shape::is_gpt2(layers) {
        Some(WeightNaming::HfGpt2)
    } else if ergon_job_spec::shape::is_llama(layers) {
        Some(WeightNaming::HfLlama)
    } else {
        None
    }
}

/// Matches safetensors `bytes` (from `file`) to `spec`'s parameters under `naming`.
pub fn from_safetensors(
    spec: &JobSpec,
    naming: WeightNaming,
    file: &str,
    bytes: &[u8],
) -> Result<InitialWeights> {
    let st =
        SafeTensors::deserialize(bytes).map_err(|e| bad(file, format!("not safetensors: {e}")))?;
    let mut unread: std::collections::BTreeSet<String> =
        st.names().into_iter().map(str::to_string).collect();
    let mut tensors = BTreeMap::new();
    for (param, shape) in Model::base_layout(spec)? {
        let stored = file_name(spec, naming, &param)
            .ok_or_else(|| bad(file, format!("the naming has no name for parameter {param}")))?;
        let found = spellings(naming, &stored.name)
            .into_iter()
            .find_map(|n| st.tensor(&n).ok().map(|t| (n, t)));
        let (name, view) = found.ok_or_else(|| {
            bad(
                file,
                format!("tensor {} (parameter {param}, shape {shape:?}) is missing", stored.name),
            )
        })?;
        unread.remove(&name);
        let mut stored_shape = shape.clone();
        if stored.transposed {
            stored_shape.reverse();
        }
        if view.shape() != stored_shape.as_slice() {
            return Err(bad(
                file,
                format!(
                    "tensor {name} has shape {:?}; parameter {param} needs {stored_shape:?}",
                    view.shape()
                ),
            ));
        }
        let mut values = widen(file, &name, &view)?;
        if stored.transposed {
            values = transpose(&values, stored_shape[0], stored_shape[1]);
        }
        tensors.insert(param, (shape, values));
    }
    // A tied head's `lm_head.weight`, when a file keeps it, must be the embedding it is tied to.
    if let Some(head) = unread.iter().find(|n| *n == "lm_head.weight").cloned() {
        let tied = matches!(
            spec.model.layers.as_slice().last(),
            Some(ergon_job_spec::Layer::TiedEmbeddingHead)
        );
        let same = st.tensor(&head).ok().and_then(|t| widen(file, &head, &t).ok())
            == tensors.get("layers.0.weight").map(|(_, values)| values.clone());
        if tied && same {
            unread.remove(&head);
        }
    }
    unread.retain(|n| !ignorable(naming, n));
    if !unread.is_empty() {
        let names: Vec<&str> = unread.iter().take(5).map(String::as_str).collect();
        return Err(bad(
            file,
            format!(
                "{} tensors have no place in the model (a different architecture or size?): {}",
                unread.len(),
                names.join(", ")
            ),
        ));
    }
    Ok(InitialWeights { tensors })
}

/// A tensor's values as f32: f32 as stored, f16 and bf16 widened (exactly).
fn widen(file: &str, name: &str, view: &TensorView<'_>) -> Result<Vec<f32>> {
    let data = view.data();
    Ok(match view.dtype() {
        Dtype::F32 => {
            data.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
        }
        Dtype::BF16 => data
            .chunks_exact(2)
            .map(|c| f32::from_bits((u16::from_le_bytes([c[0], c[1]]) as u32) << 16))
            .collect(),
        Dtype::F16 => data
            .chunks_exact(2)
            .map(|c| half::f16::from_bits(u16::from_le_bytes([c[0], c[1]])).to_f32())
            .collect(),
        other => {
            return Err(bad(
                file,
                format!("tensor {name} is {other:?}; weights are f32, f16 or bf16"),
            ))
        }
    })
}

/// `[rows, cols]` row-major → `[cols, rows]`.
fn transpose(values: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut out = vec![0.0; values.len()];
    for r in 0..rows {
        for c in 0..cols {
            out[c * rows + r] = values[r * cols + c];
        }
    }
    out
}

/// Writes `params` (Ergon name → value) of `spec`'s GPT-2 or Llama into `dir` in Hugging Face's
/// layout: `config.json` and `model.safetensors` (`GPT2LMHeadModel` or `LlamaForCausalLM` names),
/// and `tokenizer.json` when given. `transformers` loads it with `from_pretrained(dir)`.
pub fn export_hf(
    spec: &JobSpec,
    params: &NamedTensors,
    dir: &Path,
    tokenizer: Option<&Path>,
) -> Result<()> {
    let refused = || {
        bad(
            "config.json",
            "only GPT-2- and Llama-shaped models export to Hugging Face's layout (see WeightNaming)",
        )
    };
    let naming = hf_naming(spec).ok_or_else(refused)?;
    let config = match naming {
        WeightNaming::HfLlama => hf_llama::config(spec),
        _ => hf_gpt2::config(spec),
    }
    .ok_or_else(refused)?;
    let mut out = BTreeMap::new();
    for (param, (shape, values)) in params {
        let hf = file_name(spec, naming, param)
            .ok_or_else(|| bad("model.safetensors", format!("no {naming:?} name for {param}")))?;
        let name = if hf.name == "lm_head.weight" {
            hf.name
        } else {
            format!("{}{}", prefix(naming), hf.name)
        };
        let t = match shape[..] {
            [rows, cols] if hf.transposed => (vec![cols, rows], transpose(values, rows, cols)),
            _ => (shape.clone(), values.clone()),
        };
        out.insert(name, t);
    }
    let io = |what: &'static str, path: &Path| {
        let path = path.to_path_buf();
        move |source| Error::Io { action: what, path, source }
    };
    std::fs::create_dir_all(dir).map_err(io("creating", dir))?;
    let config_path = dir.join("config.json");
    let json = serde_json::to_vec_pretty(&config).map_err(|e| bad("config.json", e.to_string()))?;
    std::fs::write(&config_path, json).map_err(io("writing", &config_path))?;
    let model_path = dir.join("model.safetensors");
    let bytes = HostTensors(out).to_safetensors(&model_path)?;
    std::fs::write(&model_path, bytes).map_err(io("writing", &model_path))?;
    if let Some(tokenizer) = tokenizer {
        let to = dir.join("tokenizer.json");
        std::fs::copy(tokenizer, &to).map_err(io("copying", tokenizer))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transpose_swaps_rows_and_columns() {
        assert_eq!(transpose(&[1., 2., 3., 4., 5., 6.], 2, 3), vec![1., 4., 2., 5., 3., 6.]);
    }
}
