//! Hugging Face `transformers`' GPT-2 names for Ergon's parameters, and its `config.json`.
//!
//! A GPT-2 spec is `Embedding, PositionalEmbedding, TransformerBlock × n, LayerNorm, head`
//! ([`ergon_job_spec::shape::is_gpt2`]); its parameters map one to one onto `GPT2LMHeadModel`'s:
//!
//! | Ergon                                  | Hugging Face                        |
//! |----------------------------------------|-------------------------------------|
//! | `layers.0.weight`                      | `transformer.wte.weight`            |
//! | `layers.1.weight`                      | `transformer.wpe.weight`            |
//! | `layers.{2+k}.ln1.gamma` / `.beta`     | `transformer.h.{k}.ln_1.weight` / `.bias` |
//! | `layers.{2+k}.attn.qkv.weight` / `.bias` | `transformer.h.{k}.attn.c_attn.weight`ᵀ / `.bias` |
//! | `layers.{2+k}.attn.proj.*`             | `transformer.h.{k}.attn.c_proj.*` (weight ᵀ) |
//! | `layers.{2+k}.ln2.*`                   | `transformer.h.{k}.ln_2.*`          |
//! | `layers.{2+k}.mlp.fc1.*`               | `transformer.h.{k}.mlp.c_fc.*` (weight ᵀ) |
//! | `layers.{2+k}.mlp.fc2.*`               | `transformer.h.{k}.mlp.c_proj.*` (weight ᵀ) |
//! | `layers.{n−2}.gamma` / `.beta`         | `transformer.ln_f.weight` / `.bias` |
//! | `layers.{n−1}.weight` (untied head)    | `lm_head.weight`                    |
//!
//! GPT-2's `Conv1D` stores its weight `[in, out]`, Ergon's linear layers `[out, in]` (ᵀ above). The
//! attention's fused `c_attn` splits into queries, keys and values and each into heads in the same
//! order as Ergon's, LayerNorm's ε is 1e-5 in both and `gelu_new` is Ergon's tanh GELU, so the same
//! weights give the same logits (`tests/hf_roundtrip.rs`).

use ergon_job_spec::{JobSpec, Layer};

use super::HfName;

/// The prefix of the base model's tensors in a `GPT2LMHeadModel` file (a `GPT2Model` file has none).
pub const PREFIX: &str = "transformer.";

/// The GPT-2 name of Ergon parameter `param` of `spec`'s model, `None` if `spec` is no GPT-2 or has
/// no such parameter.
pub fn name(spec: &JobSpec, param: &str) -> Option<HfName> {
    let layers = spec.model.layers.as_slice();
    if !ergon_job_spec::shape::is_gpt2(layers) {
        return None;
    }
    let rest = param.strip_prefix("layers.")?;
    let (index, sub) = rest.split_once('.')?;
    let index: usize = index.parse().ok()?;
    let plain = |name: &str| Some(HfName { name: name.to_string(), transposed: false });
    match (layers.get(index)?, sub) {
        (Layer::Embedding { .. }, "weight") => plain("wte.weight"),
        (Layer::PositionalEmbedding { .. }, "weight") => plain("wpe.weight"),
        (Layer::LayerNorm { .. }, "gamma") => plain("ln_f.weight"),
        (Layer::LayerNorm { .. }, "beta") => plain("ln_f.bias"),
        (Layer::Linear { .. }, "weight") => plain("lm_head.weight"),
        (Layer::TransformerBlock { .. }, sub) => {
            let (module, tensor) = sub.rsplit_once('.')?;
            let (hf_module, linear) = match module {
                "ln1" => ("ln_1", false),
                "ln2" => ("ln_2", false),
                "attn.qkv" => ("attn.c_attn", true),
                "attn.proj" => ("attn.c_proj", true),
                "mlp.fc1" => ("mlp.c_fc", true),
                "mlp.fc2" => ("mlp.c_proj", true),
                _ => return None,
            };
            let hf_tensor = match (linear, tensor) {
                (false, "gamma") | (true, "weight") => "weight",
                (false, "beta") | (true, "bias") => "bias",
                _ => return None,
            };
            Some(HfName {
                name: format!("h.{}.{hf_module}.{hf_tensor}", index - 2),
                transposed: linear && tensor == "weight",
            })
        }
        _ => None,
    }
}

/// Tensors a GPT-2 file may hold that are no parameters: the causal-mask buffers older
/// `transformers` versions saved.
pub fn is_buffer(name: &str) -> bool {
    name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias")
}

/// `config.json` of `spec`'s GPT-2 for `transformers` (`GPT2LMHeadModel`, f32, no dropout).
pub fn config(spec: &JobSpec) -> Option<serde_json::Value> {
    let layers = spec.model.layers.as_slice();
    if !ergon_job_spec::shape::is_gpt2(layers) {
        return None;
    }
    let Layer::Embedding { vocab_size, dim } = layers[0] else { return None };
    let Layer::PositionalEmbedding { max_len, .. } = layers[1] else { return None };
    let blocks: Vec<(u32, u32)> = layers
        .iter()
        .filter_map(|l| match l {
            Layer::TransformerBlock { heads, hidden, .. } => Some((*heads, *hidden)),
            _ => None,
        })
        .collect();
    let (heads, hidden) = *blocks.first()?;
    // transformers' GPT-2 has one head count and MLP width for all blocks.
    if blocks.iter().any(|b| *b != (heads, hidden)) {
        return None;
    }
    let tied = matches!(layers.last(), Some(Layer::TiedEmbeddingHead));
    Some(serde_json::json!({
        "architectures": ["GPT2LMHeadModel"],
        "model_type": "gpt2",
        "vocab_size": vocab_size,
        "n_positions": max_len,
        "n_embd": dim,
        "n_layer": blocks.len(),
        "n_head": heads,
        "n_inner": hidden,
        "activation_function": "gelu_new",
        "layer_norm_epsilon": crate::model::LAYER_NORM_EPS,
        "resid_pdrop": 0.0,
        "embd_pdrop": 0.0,
        "attn_pdrop": 0.0,
        "scale_attn_weights": true,
        "scale_attn_by_inverse_layer_idx": false,
        "reorder_and_upcast_attn": false,
        "tie_word_embeddings": tied,
        "torch_dtype": "float32",
    }))
}
