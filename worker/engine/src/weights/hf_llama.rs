//! Hugging Face `transformers`' Llama names for Ergon's parameters, and its `config.json`.
//!
//! A Llama spec is `Embedding, LlamaBlock × n, RMSNorm, head` ([`ergon_job_spec::shape::is_llama`]);
//! its parameters map one to one onto `LlamaForCausalLM`'s, every weight `[out, in]` in both:
//!
//! | Ergon                                 | Hugging Face                                        |
//! |---------------------------------------|-----------------------------------------------------|
//! | `layers.0.weight`                     | `model.embed_tokens.weight`                         |
//! | `layers.{1+k}.norm1.gain`             | `model.layers.{k}.input_layernorm.weight`           |
//! | `layers.{1+k}.attn.{q,k,v,o}.weight`  | `model.layers.{k}.self_attn.{q,k,v,o}_proj.weight`  |
//! | `layers.{1+k}.norm2.gain`             | `model.layers.{k}.post_attention_layernorm.weight`  |
//! | `layers.{1+k}.mlp.{gate,up,down}.weight` | `model.layers.{k}.mlp.{gate,up,down}_proj.weight` |
//! | `layers.{n−2}.gain`                   | `model.norm.weight`                                 |
//! | `layers.{n−1}.weight` (untied head)   | `lm_head.weight`                                    |
//!
//! Rotary positions rotate each head's two halves (`rotate_half`), keys and values are shared by
//! groups of consecutive query heads (`repeat_kv`), RMSNorm's ε is 10⁻⁵ and the MLP's activation
//! SiLU, as in `transformers` (`worker/engine/tests/fine_tune.rs` compares the logits).

use ergon_job_spec::{DataFormat, JobSpec, Layer};

use super::HfName;

/// The prefix of the base model's tensors in a `LlamaForCausalLM` file.
pub const PREFIX: &str = "model.";

/// The Llama name of Ergon parameter `param` of `spec`'s model, `None` if `spec` is no Llama or has
/// no such parameter.
pub fn name(spec: &JobSpec, param: &str) -> Option<HfName> {
    let layers = spec.model.layers.as_slice();
    if !ergon_job_spec::shape::is_llama(layers) {
        return None;
    }
    let (index, sub) = param.strip_prefix("layers.")?.split_once('.')?;
    let index: usize = index.parse().ok()?;
    let plain = |name: String| Some(HfName { name, transposed: false });
    match (layers.get(index)?, sub) {
        (Layer::Embedding { .. }, "weight") => plain("embed_tokens.weight".into()),
        (Layer::RMSNorm { .. }, "gain") => plain("norm.weight".into()),
        (Layer::Linear { .. }, "weight") => plain("lm_head.weight".into()),
        (Layer::LlamaBlock { .. }, sub) => {
            let hf = match sub {
                "norm1.gain" => "input_layernorm.weight",
                "norm2.gain" => "post_attention_layernorm.weight",
                "attn.q.weight" => "self_attn.q_proj.weight",
                "attn.k.weight" => "self_attn.k_proj.weight",
                "attn.v.weight" => "self_attn.v_proj.weight",
                "attn.o.weight" => "self_attn.o_proj.weight",
                "mlp.gate.weight" => "mlp.gate_proj.weight",
                "mlp.up.weight" => "mlp.up_proj.weight",
                "mlp.down.weight" => "mlp.down_proj.weight",
                _ => return None,
            };
            plain(format!("layers.{}.{hf}", index - 1))
        }
        _ => None,
    }
}

/// Tensors a Llama file may hold that are no parameters: older `transformers` saved the rotary
/// frequencies.
pub fn is_buffer(name: &str) -> bool {
    name.ends_with("rotary_emb.inv_freq")
}

/// `config.json` of `spec`'s Llama for `transformers` (`LlamaForCausalLM`, f32).
pub fn config(spec: &JobSpec) -> Option<serde_json::Value> {
    let layers = spec.model.layers.as_slice();
    if !ergon_job_spec::shape::is_llama(layers) {
        return None;
    }
    let Layer::Embedding { vocab_size, dim } = layers[0] else { return None };
    let blocks: Vec<(u32, u32, u32, u32)> = layers
        .iter()
        .filter_map(|l| match l {
            Layer::LlamaBlock { heads, kv_heads, hidden, rope_theta, .. } => {
                Some((*heads, *kv_heads, *hidden, *rope_theta))
            }
            _ => None,
        })
        .collect();
    let (heads, kv_heads, hidden, theta) = *blocks.first()?;
    if blocks.iter().any(|b| *b != (heads, kv_heads, hidden, theta)) {
        return None;
    }
    // Rotary positions have no table to outgrow: the trained context length is the one to name.
    let context = match spec.train.format {
        DataFormat::Tokens { seq_len, .. } | DataFormat::Text { seq_len } => seq_len,
        _ => 2048,
    };
    let tied = matches!(layers.last(), Some(Layer::TiedEmbeddingHead));
    Some(serde_json::json!({
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": vocab_size,
        "hidden_size": dim,
        "intermediate_size": hidden,
        "num_hidden_layers": blocks.len(),
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": dim / heads,
        "max_position_embeddings": context,
        "hidden_act": "silu",
        "rms_norm_eps": crate::model::RMS_NORM_EPS,
        "rope_theta": theta,
        "rope_parameters": { "rope_type": "default", "rope_theta": theta },
        "attention_bias": false,
        "mlp_bias": false,
        "attention_dropout": 0.0,
        "tie_word_embeddings": tied,
        "torch_dtype": "float32",
    }))
}
