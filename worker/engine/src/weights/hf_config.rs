//! A Hugging Face `config.json` read as Ergon's layers — the inverse of [`super::hf_gpt2::config`]
//! and [`super::hf_llama::config`]: the model a fine-tune's spec names for a GPT-2 or a Llama
//! downloaded from a hub, with the weight naming its `model.safetensors` uses.
//!
//! Ergon's architectures fix what `transformers` leaves configurable (the norms' ε, the
//! activations, unscaled rotary positions, no biases in a Llama): a config that asks for anything
//! else is refused with the field and the value, never trained as a different model.

use ergon_job_spec::{Layer, WeightNaming};
use serde_json::Value;

use crate::model::{LAYER_NORM_EPS, RMS_NORM_EPS};

/// What a config describes.
#[derive(Clone, Debug, PartialEq)]
pub struct HfModel {
    /// The spec's layers.
    pub layers: Vec<Layer>,
    /// How its weights file names the parameters.
    pub naming: WeightNaming,
    /// The longest context the model was built for (GPT-2's position table, Llama's
    /// `max_position_embeddings`).
    pub context: u32,
    /// What the config asks for that Ergon does not do and that changes no weight (dropout): said
    /// to the user, not refused.
    pub ignored: Vec<String>,
}

/// Reads `config` (a `config.json`'s value).
pub fn model_of_config(config: &Value) -> Result<HfModel, String> {
    match config.get("model_type").and_then(Value::as_str) {
        Some("gpt2") => gpt2(&Fields(config)),
        Some("llama") => llama(&Fields(config)),
        Some(other) => Err(format!(
            "model_type {other:?}: Ergon reads GPT-2 (\"gpt2\") and Llama (\"llama\") configs"
        )),
        None => Err("config.json names no model_type".into()),
    }
}

/// A config's fields, read with their `transformers` defaults.
struct Fields<'a>(&'a Value);

impl Fields<'_> {
    fn get(&self, name: &str) -> Option<&Value> {
        self.0.get(name).filter(|v| !v.is_null())
    }

    /// A positive integer that fits a spec's `u32`.
    fn count(&self, name: &str, default: Option<u64>) -> Result<u32, String> {
        let v = match self.get(name) {
            Some(v) => v.as_u64().ok_or_else(|| format!("{name}: {v} is not a whole number"))?,
            None => default.ok_or_else(|| format!("config.json has no {name}"))?,
        };
        u32::try_from(v)
            .ok()
            .filter(|v| *v > 0)
            .ok_or_else(|| format!("{name}: {v} is out of range"))
    }

    fn float(&self, name: &str, default: f64) -> Result<f64, String> {
        match self.get(name) {
            Some(v) => v.as_f64().ok_or_else(|| format!("{name}: {v} is not a number")),
            None => Ok(default),
        }
    }

    fn flag(&self, name: &str, default: bool) -> Result<bool, String> {
        match self.get(name) {
            Some(v) => v.as_bool().ok_or_else(|| format!("{name}: {v} is not true or false")),
            None => Ok(default),
        }
    }

    fn text(&self, name: &str, default: &str) -> Result<String, String> {
        match self.get(name) {
            Some(v) => {
                v.as_str().map(str::to_string).ok_or_else(|| format!("{name}: {v} is not a string"))
            }
            None => Ok(default.to_string()),
        }
    }

    /// `name` must be `want` (Ergon's fixed choice), within float rounding.
    fn require_eps(&self, name: &str, default: f64, want: f64) -> Result<(), String> {
        let eps = self.float(name, default)?;
        if (eps - want).abs() > want * 1e-6 {
            return Err(format!("{name} {eps:e}: Ergon's norms use ε = {want:e}"));
        }
        Ok(())
    }

    /// Dropout probabilities above zero, named for [`HfModel::ignored`].
    fn dropouts(&self, names: &[&str]) -> Vec<String> {
        names
            .iter()
            .filter_map(|n| {
                self.get(n).and_then(Value::as_f64).filter(|p| *p > 0.0).map(|p| (n, p))
            })
            .map(|(n, p)| format!("{n} {p} (Ergon trains without dropout)"))
            .collect()
    }
}

/// `GPT2LMHeadModel`: learned positions, pre-LN blocks with the tanh GELU, a tied head.
fn gpt2(f: &Fields) -> Result<HfModel, String> {
    let act = f.text("activation_function", "gelu_new")?;
    if !matches!(act.as_str(), "gelu_new" | "gelu_pytorch_tanh") {
        return Err(format!(
            "activation_function {act:?}: Ergon's GPT-2 uses the tanh GELU (gelu_new)"
        ));
    }
    f.require_eps("layer_norm_epsilon", 1e-5, LAYER_NORM_EPS)?;
    for (name, default, want) in [
        ("scale_attn_weights", true, true),
        ("scale_attn_by_inverse_layer_idx", false, false),
        ("add_cross_attention", false, false),
        ("tie_word_embeddings", true, true),
    ] {
        if f.flag(name, default)? != want {
            return Err(format!("{name} {}: Ergon's GPT-2 needs {want}", !want));
        }
    }
    let (vocab_size, dim) = (f.count("vocab_size", Some(50_257))?, f.count("n_embd", Some(768))?);
    let (blocks, heads) = (f.count("n_layer", Some(12))?, f.count("n_head", Some(12))?);
    let hidden = f.count("n_inner", Some(4 * dim as u64))?;
    let context = f.count("n_positions", Some(1024))?;
    let mut layers = vec![
        Layer::Embedding { vocab_size, dim },
        Layer::PositionalEmbedding { max_len: context, dim },
    ];
    layers.extend((0..blocks).map(|_| Layer::TransformerBlock { dim, heads, hidden }));
    layers.extend([Layer::LayerNorm { dim }, Layer::TiedEmbeddingHead]);
    let ignored = f.dropouts(&["resid_pdrop", "embd_pdrop", "attn_pdrop"]);
    Ok(HfModel { layers, naming: WeightNaming::HfGpt2, context, ignored })
}

/// `LlamaForCausalLM`: RMSNorm, rotary positions, SwiGLU, grouped-query attention, no biases.
fn llama(f: &Fields) -> Result<HfModel, String> {
    let act = f.text("hidden_act", "silu")?;
    if act != "silu" {
        return Err(format!("hidden_act {act:?}: Ergon's Llama uses SiLU"));
    }
    f.require_eps("rms_norm_eps", 1e-6, RMS_NORM_EPS)?;
    for name in ["attention_bias", "mlp_bias"] {
        if f.flag(name, false)? {
            return Err(format!("{name} true: Ergon's Llama has no biases"));
        }
    }
    // Rotary positions unscaled: transformers 4 names the base `rope_theta` and a scaling in
    // `rope_scaling`; transformers 5 puts both in `rope_parameters`.
    let rope = f.get("rope_parameters").or_else(|| f.get("rope_scaling"));
    let rope_type = rope
        .and_then(|r| r.get("rope_type").or_else(|| r.get("type")))
        .and_then(Value::as_str)
        .unwrap_or("default");
    if rope_type != "default" {
        return Err(format!("rope type {rope_type:?}: Ergon's rotary positions are unscaled"));
    }
    let theta = match rope.and_then(|r| r.get("rope_theta")).filter(|v| !v.is_null()) {
        Some(v) => v.as_f64().ok_or_else(|| format!("rope_theta: {v} is not a number"))?,
        None => f.float("rope_theta", 10_000.0)?,
    };
    if theta.fract() != 0.0 || !(1.0..=u32::MAX as f64).contains(&theta) {
        return Err(format!("rope_theta {theta}: a spec names a whole base up to {}", u32::MAX));
    }
    let (vocab_size, dim) =
        (f.count("vocab_size", Some(32_000))?, f.count("hidden_size", Some(4096))?);
    let heads = f.count("num_attention_heads", Some(32))?;
    let kv_heads = f.count("num_key_value_heads", Some(heads as u64))?;
    if let Some(head_dim) = f.get("head_dim") {
        if head_dim.as_u64() != Some((dim / heads) as u64) {
            return Err(format!(
                "head_dim {head_dim}: Ergon's heads are hidden_size / num_attention_heads = {}",
                dim / heads
            ));
        }
    }
    let hidden = f.count("intermediate_size", Some(11_008))?;
    let blocks = f.count("num_hidden_layers", Some(32))?;
    let context = f.count("max_position_embeddings", Some(2048))?;
    let block = Layer::LlamaBlock { dim, heads, kv_heads, hidden, rope_theta: theta as u32 };
    let mut layers = vec![Layer::Embedding { vocab_size, dim }];
    layers.extend((0..blocks).map(|_| block.clone()));
    layers.push(Layer::RMSNorm { dim });
    layers.push(if f.flag("tie_word_embeddings", false)? {
        Layer::TiedEmbeddingHead
    } else {
        Layer::Linear { in_features: dim, out_features: vocab_size, bias: false }
    });
    let ignored = f.dropouts(&["attention_dropout"]);
    Ok(HfModel { layers, naming: WeightNaming::HfLlama, context, ignored })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ergon_job_spec::{Bounded, JobSpec};

    /// A spec of `layers` on token windows of `seq` tokens below `vocab`.
    fn spec_with(layers: Vec<Layer>, vocab: u32, seq: u32) -> JobSpec {
        let format = ergon_job_spec::DataFormat::Tokens {
            width: ergon_job_spec::TokenWidth::U16,
            vocab_size: vocab,
            seq_len: seq,
        };
        let small = vec![
            Layer::Embedding { vocab_size: 97, dim: 8 },
            Layer::PositionalEmbedding { max_len: 16, dim: 8 },
            Layer::TransformerBlock { dim: 8, heads: 2, hidden: 16 },
            Layer::LayerNorm { dim: 8 },
            Layer::TiedEmbeddingHead,
        ];
        let small_format = ergon_job_spec::DataFormat::Tokens {
            width: ergon_job_spec::TokenWidth::U16,
            vocab_size: 97,
            seq_len: 16,
        };
        let mut spec = crate::model::tests::spec_of(small, small_format);
        spec.model.layers = Bounded::new(layers).unwrap();
        spec.train.format = format.clone();
        spec.validation.format = format;
        spec
    }

    /// What Ergon's exporter writes reads back as the same layers.
    #[test]
    fn exported_configs_read_back_as_their_layers() {
        let gpt2 = vec![
            Layer::Embedding { vocab_size: 97, dim: 32 },
            Layer::PositionalEmbedding { max_len: 24, dim: 32 },
            Layer::TransformerBlock { dim: 32, heads: 4, hidden: 64 },
            Layer::TransformerBlock { dim: 32, heads: 4, hidden: 64 },
            Layer::LayerNorm { dim: 32 },
            Layer::TiedEmbeddingHead,
        ];
        let config = super::super::hf_gpt2::config(&spec_with(gpt2.clone(), 97, 16)).unwrap();
        let read = model_of_config(&config).unwrap();
        assert_eq!((read.layers, read.naming, read.context), (gpt2, WeightNaming::HfGpt2, 24));
        assert!(read.ignored.is_empty());

        let block =
            Layer::LlamaBlock { dim: 32, heads: 4, kv_heads: 2, hidden: 64, rope_theta: 500_000 };
        let llama = vec![
            Layer::Embedding { vocab_size: 97, dim: 32 },
            block.clone(),
            block,
            Layer::RMSNorm { dim: 32 },
            Layer::Linear { in_features: 32, out_features: 97, bias: false },
        ];
        let config = super::super::hf_llama::config(&spec_with(llama.clone(), 97, 16)).unwrap();
        let read = model_of_config(&config).unwrap();
        assert_eq!((read.layers, read.naming), (llama, WeightNaming::HfLlama));
    }

    /// GPT-2 small's config as the hub ships it (`n_inner` null, dropout 0.1, no tying field).
    #[test]
    fn gpt2_smalls_hub_config_is_gpt2_small() {
        let config = serde_json::json!({
            "activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"],
            "attn_pdrop": 0.1, "bos_token_id": 50256, "embd_pdrop": 0.1, "eos_token_id": 50256,
            "initializer_range": 0.02, "layer_norm_epsilon": 1e-05, "model_type": "gpt2",
            "n_ctx": 1024, "n_embd": 768, "n_head": 12, "n_layer": 12, "n_positions": 1024,
            "resid_pdrop": 0.1, "summary_activation": null, "summary_first_dropout": 0.1,
            "summary_proj_to_labels": true, "summary_type": "cls_index", "summary_use_proj": true,
            "vocab_size": 50257
        });
        let m = model_of_config(&config).unwrap();
        assert_eq!(m.layers.len(), 2 + 12 + 2);
        assert_eq!(m.layers[2], Layer::TransformerBlock { dim: 768, heads: 12, hidden: 3072 });
        assert_eq!(m.ignored.len(), 3, "{:?}", m.ignored);
        let spec = spec_with(m.layers, 50_257, 1024);
        assert_eq!(spec.validate().unwrap().parameters, 124_439_808, "GPT-2 small's count");
    }

    #[test]
    fn what_ergon_does_not_compute_is_refused_by_name() {
        let gpt2 = |field: &str, value: Value| {
            let mut c = serde_json::json!({"model_type": "gpt2", "n_embd": 32, "n_head": 4, "n_layer": 1, "vocab_size": 97, "n_positions": 16});
            c[field] = value;
            model_of_config(&c).unwrap_err()
        };
        assert!(gpt2("activation_function", "relu".into()).contains("activation_function"));
        assert!(gpt2("layer_norm_epsilon", 1e-6.into()).contains("layer_norm_epsilon"));
        assert!(gpt2("scale_attn_by_inverse_layer_idx", true.into()).contains("scale_attn_by"));
        assert!(gpt2("n_layer", (-1).into()).contains("n_layer"));
        let llama = |field: &str, value: Value| {
            let mut c = serde_json::json!({"model_type": "llama", "hidden_size": 32, "num_attention_heads": 4, "num_hidden_layers": 1, "vocab_size": 97, "intermediate_size": 64, "rms_norm_eps": 1e-5});
            c[field] = value;
            model_of_config(&c).unwrap_err()
        };
        assert!(llama("rms_norm_eps", 1e-6.into()).contains("rms_norm_eps"));
        assert!(llama("attention_bias", true.into()).contains("attention_bias"));
        assert!(llama("rope_scaling", serde_json::json!({"rope_type": "llama3", "factor": 8.0}))
            .contains("llama3"));
        assert!(llama("head_dim", 16.into()).contains("head_dim"));
        assert!(model_of_config(&serde_json::json!({"model_type": "mistral"}))
            .unwrap_err()
            .contains("mistral"));
    }
}
