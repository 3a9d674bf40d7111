//! Exact integer FLOP counts of one forward pass, per layer kind and per sample.
//!
//! A multiply-add counts as 2 FLOPs. Element-wise costs are fixed per element and documented on each
//! function, so the count is a formula anyone can check, not a measurement. Training FLOPs are
//! 3 × forward (the backward pass costs about twice the forward).
//!
//! All functions use checked `u128` arithmetic and return `None` on overflow.

/// FLOPs per element of GELU (tanh approximation: cube, two multiply-adds, tanh, scale).
pub const GELU_FLOPS_PER_ELEMENT: u128 = 8;
/// FLOPs per element of LayerNorm: mean (1), centre (1), square (1), variance sum (1), normalize (2),
/// affine scale and shift (2).
pub const LAYER_NORM_FLOPS_PER_ELEMENT: u128 = 8;
/// FLOPs per element of RMSNorm: square (1), sum (1), normalize (1), gain (1).
pub const RMS_NORM_FLOPS_PER_ELEMENT: u128 = 4;
/// FLOPs per element of SiLU (`x / (1 + exp(−x))`: exp, add, divide, and the sign).
pub const SILU_FLOPS_PER_ELEMENT: u128 = 4;
/// FLOPs per rotated element of rotary positions (two multiplies and an add).
pub const ROPE_FLOPS_PER_ELEMENT: u128 = 3;
/// FLOPs per logit of softmax (max, subtract, exp, sum, divide).
pub const SOFTMAX_FLOPS_PER_ELEMENT: u128 = 5;
/// FLOPs per logit of softmax cross-entropy (softmax plus the log-likelihood pick-up).
pub const CROSS_ENTROPY_FLOPS_PER_LOGIT: u128 = 5;

fn mul(values: &[u128]) -> Option<u128> {
    values.iter().try_fold(1u128, |acc, v| acc.checked_mul(*v))
}

fn sum(values: &[Option<u128>]) -> Option<u128> {
    values.iter().try_fold(0u128, |acc, v| acc.checked_add((*v)?))
}

/// Linear on `rows` rows: `2·rows·in·out`, plus `rows·out` for the bias.
pub fn linear(rows: u128, inp: u128, out: u128, bias: bool) -> Option<u128> {
    sum(&[mul(&[2, rows, inp, out]), if bias { mul(&[rows, out]) } else { Some(0) }])
}

/// Conv2d: `2·in·k²·out·H'·W'`, plus `out·H'·W'` for the bias.
pub fn conv2d(inp: u128, out: u128, k: u128, ho: u128, wo: u128, bias: bool) -> Option<u128> {
    sum(&[mul(&[2, inp, k, k, out, ho, wo]), if bias { mul(&[out, ho, wo]) } else { Some(0) }])
}

/// MaxPool2d: one comparison per window element, `C·H'·W'·k²`.
pub fn max_pool2d(c: u128, ho: u128, wo: u128, k: u128) -> Option<u128> {
    mul(&[c, ho, wo, k, k])
}

/// ReLU: one per element.
pub fn relu(elements: u128) -> Option<u128> {
    Some(elements)
}

/// GELU: [`GELU_FLOPS_PER_ELEMENT`] per element.
pub fn gelu(elements: u128) -> Option<u128> {
    elements.checked_mul(GELU_FLOPS_PER_ELEMENT)
}

/// LayerNorm: [`LAYER_NORM_FLOPS_PER_ELEMENT`] per element.
pub fn layer_norm(elements: u128) -> Option<u128> {
    elements.checked_mul(LAYER_NORM_FLOPS_PER_ELEMENT)
}

/// Embedding lookup: a gather, 0 FLOPs.
pub fn embedding() -> Option<u128> {
    Some(0)
}

/// Positional embedding: one addition per element.
pub fn positional_embedding(t: u128, d: u128) -> Option<u128> {
    mul(&[t, d])
}

/// Pre-norm transformer block on `[t, d]` with `h` heads and MLP width `hidden`. With `n = t·d`:
/// LN 8n; QKV `2·t·d·3d + 3n`; scores `2·t²·d`; scaling `t²·h`; softmax `5·t²·h` (over the full
/// masked square); weighted values `2·t²·d`; output projection `2·t·d² + n`; residual n; LN 8n;
/// MLP `2·t·d·hidden + t·hidden`, GELU `8·t·hidden`, `2·t·hidden·d + n`; residual n.
pub fn transformer_block(t: u128, d: u128, h: u128, hidden: u128) -> Option<u128> {
    let n = mul(&[t, d])?;
    let tt = mul(&[t, t])?;
    sum(&[
        layer_norm(n),
        linear(t, d, d.checked_mul(3)?, true),
        mul(&[2, tt, d]),
        mul(&[tt, h]),
        mul(&[SOFTMAX_FLOPS_PER_ELEMENT, tt, h]),
        mul(&[2, tt, d]),
        linear(t, d, d, true),
        Some(n),
        layer_norm(n),
        linear(t, d, hidden, true),
        gelu(mul(&[t, hidden])?),
        linear(t, hidden, d, true),
        Some(n),
    ])
}

/// RMSNorm: [`RMS_NORM_FLOPS_PER_ELEMENT`] per element.
pub fn rms_norm(elements: u128) -> Option<u128> {
    elements.checked_mul(RMS_NORM_FLOPS_PER_ELEMENT)
}

/// Llama-style block on `[t, d]` with `h` query heads, `kv` key/value heads of width `d/h` and
/// SwiGLU width `hidden`. With `n = t·d` and `n_kv = t·kv·d/h`: RMSNorm 4n; Q `2·t·d²`; K and V
/// `2·t·d·(kv·d/h)` each; RoPE `3·(n + n_kv)`; scores `2·t²·d`; scaling `t²·h`; softmax `5·t²·h`
/// (the full masked square); weighted values `2·t²·d`; O `2·t·d²`; residual n; RMSNorm 4n; gate
/// and up `2·t·d·hidden` each; SiLU `4·t·hidden`; the product `t·hidden`; down `2·t·hidden·d`;
/// residual n.
pub fn llama_block(t: u128, d: u128, h: u128, kv: u128, hidden: u128) -> Option<u128> {
    let n = mul(&[t, d])?;
    let kv_width = mul(&[kv, d])?.checked_div(h)?;
    let n_kv = mul(&[t, kv_width])?;
    let tt = mul(&[t, t])?;
    sum(&[
        rms_norm(n),
        linear(t, d, d, false),
        linear(t, d, kv_width, false),
        linear(t, d, kv_width, false),
        mul(&[ROPE_FLOPS_PER_ELEMENT, n.checked_add(n_kv)?]),
        mul(&[2, tt, d]),
        mul(&[tt, h]),
        mul(&[SOFTMAX_FLOPS_PER_ELEMENT, tt, h]),
        mul(&[2, tt, d]),
        linear(t, d, d, false),
        Some(n),
        rms_norm(n),
        linear(t, d, hidden, false),
        linear(t, d, hidden, false),
        mul(&[SILU_FLOPS_PER_ELEMENT, t, hidden]),
        mul(&[t, hidden]),
        linear(t, hidden, d, false),
        Some(n),
    ])
}

/// Softmax cross-entropy over `rows` rows of `classes` logits.
pub fn cross_entropy(rows: u128, classes: u128) -> Option<u128> {
    mul(&[CROSS_ENTROPY_FLOPS_PER_LOGIT, rows, classes])
}

/// FLOPs → micro-ut (1 ut = 432·10⁹ FLOPs, so 1 micro-ut = 432,000 FLOPs), rounded down.
pub fn flops_to_micro_ut(flops: u128) -> u128 {
    flops / (crate::FLOPS_PER_UT / 1_000_000)
}
