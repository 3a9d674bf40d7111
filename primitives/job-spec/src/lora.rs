//! LoRA's adapters in a model: which projections of `spec`'s layers [`Adapters::Lora`] adapts, and
//! what they cost — the one list the chain's FLOP count and the worker's model both follow.

use alloc::vec::Vec;

use crate::{flops, Adapters, Layer, SpecError};

/// One adapted projection: where it is and its sides.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Adapted {
    /// The layer's index in the model.
    pub layer: usize,
    /// The projection's name in the layer (`attn.qkv`, `mlp.gate`, …: the parameter prefix).
    pub module: &'static str,
    /// Input features.
    pub inp: u32,
    /// Output features.
    pub out: u32,
}

/// The projections `adapters` adapts in `layers`, in model order (empty without LoRA).
pub fn adapted(layers: &[Layer], adapters: &Adapters) -> Vec<Adapted> {
    let Adapters::Lora { attention, mlp, .. } = *adapters else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (layer, l) in layers.iter().enumerate() {
        let mut add = |module, inp, outp| out.push(Adapted { layer, module, inp, out: outp });
        match *l {
            Layer::TransformerBlock { dim, hidden, .. } => {
                if attention {
                    add("attn.qkv", dim, 3 * dim);
                    add("attn.proj", dim, dim);
                }
                if mlp {
                    add("mlp.fc1", dim, hidden);
                    add("mlp.fc2", hidden, dim);
                }
            }
            Layer::LlamaBlock { dim, heads, kv_heads, hidden, .. } => {
                let kv = kv_heads * (dim / heads.max(1));
                if attention {
                    add("attn.q", dim, dim);
                    add("attn.k", dim, kv);
                    add("attn.v", dim, kv);
                    add("attn.o", dim, dim);
                }
                if mlp {
                    add("mlp.gate", dim, hidden);
                    add("mlp.up", dim, hidden);
                    add("mlp.down", hidden, dim);
                }
            }
            _ => {}
        }
    }
    out
}

/// Parameters and forward FLOPs (per sample of `t` tokens) of the adapters: per adapted projection
/// `in → out`, `rank·(in + out)` parameters and `2·t·rank·(in + out)` FLOPs for `x·Aᵀ·Bᵀ`, plus
/// `2·t·out` for the scale and the sum. `(0, 0)` without LoRA.
pub fn cost(layers: &[Layer], adapters: &Adapters, t: u32) -> Result<(u128, u128), SpecError> {
    let Adapters::Lora { rank, alpha, .. } = *adapters else {
        return Ok((0, 0));
    };
    let list = adapted(layers, adapters);
    if rank == 0 || alpha == 0 || list.is_empty() {
        return Err(SpecError::BadAdapters);
    }
    let (mut params, mut fwd) = (0u128, 0u128);
    for a in list {
        if rank > a.inp.min(a.out) {
            return Err(SpecError::BadAdapters);
        }
        let sides = a.inp as u128 + a.out as u128;
        let p = rank as u128 * sides;
        let f = flops::linear(t as u128, a.inp as u128, rank as u128, false)
            .and_then(|x| {
                x.checked_add(flops::linear(t as u128, rank as u128, a.out as u128, false)?)
            })
            .and_then(|x| x.checked_add(2 * t as u128 * a.out as u128))
            .ok_or(SpecError::Overflow)?;
        params = params.checked_add(p).ok_or(SpecError::Overflow)?;
        fwd = fwd.checked_add(f).ok_or(SpecError::Overflow)?;
    }
    Ok((params, fwd))
}
