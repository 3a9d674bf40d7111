//! The token's unit and the unit of work, for every Rust crate (the runtime, the worker, the
//! client, the tests). JavaScript has its own one copy, `ERG` in `scripts/client/lib/ergon.mjs`,
//! checked against `test-vectors.json`.

/// Plancks in one ERG: 12 decimals.
pub const ERG: u128 = 1_000_000_000_000;

/// Micro-ut in one ut, the chain's unit of training work (432·10⁹ floating-point operations).
pub const MICRO_UT_PER_UT: u128 = 1_000_000;

/// An amount written in ERG with up to 12 decimals ("100", "0.0086"), in plancks; `None` for
/// anything else (no leading digit, a sign, an exponent, a 13th decimal, an overflow). The client's
/// JavaScript reads amounts by the same rule (`plancks` in `scripts/client/lib/ergon.mjs`:
/// `^\d+(\.\d{1,12})?$`).
pub fn plancks(text: &str) -> Option<u128> {
    let (whole, fraction) = match text.split_once('.') {
        Some((whole, fraction)) if !fraction.is_empty() && fraction.len() <= 12 => {
            (whole, fraction)
        }
        Some(_) => return None,
        None => (text, ""),
    };
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || !digits(whole) || !digits(fraction) {
        return None;
    }
    let scale = 10u128.pow(12 - fraction.len() as u32);
    let fraction = if fraction.is_empty() { 0 } else { fraction.parse::<u128>().ok()? * scale };
    whole.parse::<u128>().ok()?.checked_mul(ERG)?.checked_add(fraction)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_in_erg_read_to_the_planck() {
        assert_eq!(plancks("100"), Some(100 * ERG));
        assert_eq!(plancks("0.0086"), Some(8_600_000_000));
        assert_eq!(plancks("1.000000000001"), Some(ERG + 1));
        for bad in [
            "",
            ".",
            ".5",
            "1.",
            "-1",
            "1e3",
            "0.0000000000001",
            "1,5",
            " 1",
            "340282366920938463463374607431768211455",
        ] {
            assert_eq!(plancks(bad), None, "{bad:?}");
        }
    }
}
