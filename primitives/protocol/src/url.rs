//! Which URLs a validator's offchain worker or a trainer daemon fetches on a live chain: only
//! http(s) URLs whose host is a public name or a public IP address.
//!
//! The attack (issue 34, item 8): every URL on chain is chosen by a user (a bundle's base, a data
//! file), and validators and daemons fetch them. A URL to loopback, link-local or a private range
//! turns them into an oracle on their own machines and networks (SSRF): the cloud metadata service
//! at `169.254.169.254`, an admin port on `127.0.0.1`, a database on `10.0.0.5`; their attestations
//! and verdicts tell the attacker what answered. [`check`] refuses such hosts, in every spelling an
//! HTTP client would resolve to them: IPv4 in decimal, octal or hex and with fewer than four parts
//! (`http://2130706433/` is `127.0.0.1` to a WHATWG parser), IPv6 literals including IPv4-mapped
//! ones, `localhost` and its subdomains, a trailing dot, upper case, and percent-encoding (refused
//! outright in a host). A DNS name is taken as it is: a public name that resolves to a private
//! address still passes (the runtime's HTTP API cannot see the address it connects to).
//!
//! Development and local test networks run every service on one host, so they allow private hosts
//! (the job market's `AllowPrivateUrls` genesis flag; a daemon's chain type).

use alloc::{string::String, vec::Vec};

/// Why a URL is not fetched.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Not `http://` or `https://`.
    NotHttp,
    /// The URL has no host, or one no HTTP client would parse.
    BadHost,
    /// The host is loopback, link-local, private, shared, multicast or otherwise not public.
    PrivateHost,
}

impl core::fmt::Display for Refusal {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Refusal::NotHttp => "not an http(s) URL",
            Refusal::BadHost => "no host an HTTP client would parse",
            Refusal::PrivateHost => {
                "a loopback, link-local or private host (only test networks fetch those)"
            }
        })
    }
}

/// The host of an http(s) URL, lower case, without brackets, port, user info or trailing dot.
fn host(url: &str) -> Result<String, Refusal> {
    let lower_scheme = url.get(..8).map(|s| s.to_ascii_lowercase()).unwrap_or_default();
    let rest = if lower_scheme.starts_with("http://") {
        &url[7..]
    } else if lower_scheme.starts_with("https://") {
        &url[8..]
    } else {
        return Err(Refusal::NotHttp);
    };
    // The authority ends at the path, query or fragment; WHATWG parsers take `\` as `/` in
    // http(s) URLs.
    let end = rest.find(['/', '?', '#', '\\']).unwrap_or(rest.len());
    let authority = &rest[..end];
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = if let Some(inner) = host_port.strip_prefix('[') {
        inner.split_once(']').map(|(h, _)| h).ok_or(Refusal::BadHost)?
    } else {
        host_port.rsplit_once(':').map_or(host_port, |(h, _)| h)
    };
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    if host.is_empty() || host.contains('%') || host.chars().any(|c| c.is_whitespace()) {
        return Err(Refusal::BadHost);
    }
    Ok(host)
}

/// Parses one part of a WHATWG IPv4 host: decimal, `0x` hex or `0`-prefixed octal.
fn ipv4_part(part: &str) -> Option<u64> {
    let (digits, radix) = if let Some(hex) = part.strip_prefix("0x") {
        (hex, 16)
    } else if part.len() > 1 && part.starts_with('0') {
        (&part[1..], 8)
    } else {
        (part, 10)
    };
    if digits.is_empty() {
        // "0x" alone is 0.
        return (radix == 16).then_some(0);
    }
    u64::from_str_radix(digits, radix).ok()
}

/// The IPv4 address a WHATWG URL parser makes of `host`, if it ends in a number (then it must be
/// an address, or the URL fails to parse: [`Refusal::BadHost`]).
fn ipv4(host: &str) -> Result<Option<u32>, Refusal> {
    let parts: Vec<&str> = host.split('.').collect();
    let last = parts.last().copied().unwrap_or_default();
    let ends_in_number = last.bytes().all(|b| b.is_ascii_digit())
        || (last.starts_with("0x") && last[2..].bytes().all(|b| b.is_ascii_hexdigit()));
    if !ends_in_number {
        return Ok(None);
    }
    if parts.len() > 4 {
        return Err(Refusal::BadHost);
    }
    let numbers: Vec<u64> =
        parts.iter().map(|p| ipv4_part(p)).collect::<Option<_>>().ok_or(Refusal::BadHost)?;
    let (last, init) = numbers.split_last().ok_or(Refusal::BadHost)?;
    if init.iter().any(|n| *n > 255) || *last >= 1u64 << (8 * (5 - numbers.len())) {
        return Err(Refusal::BadHost);
    }
    let mut address = *last;
    for (i, n) in init.iter().enumerate() {
        address += n << (8 * (3 - i));
    }
    Ok(Some(address as u32))
}

/// Whether an IPv4 address is public: not in 0/8, 10/8, 100.64/10, 127/8, 169.254/16, 172.16/12,
/// 192.0.0/24, 192.0.2/24, 192.168/16, 198.18/15, 198.51.100/24, 203.0.113/24, 224/4 or 240/4.
pub fn is_public_ipv4(address: u32) -> bool {
    const NOT_PUBLIC: [(u32, u32); 14] = [
        (0x0000_0000, 8),
        (0x0a00_0000, 8),
        (0x6440_0000, 10),
        (0x7f00_0000, 8),
        (0xa9fe_0000, 16),
        (0xac10_0000, 12),
        (0xc000_0000, 24),
        (0xc000_0200, 24),
        (0xc0a8_0000, 16),
        (0xc612_0000, 15),
        (0xc633_6400, 24),
        (0xcb00_7100, 24),
        (0xe000_0000, 4),
        (0xf000_0000, 4),
    ];
    !NOT_PUBLIC.iter().any(|(net, bits)| (address ^ net) >> (32 - bits) == 0)
}

/// The 16 bytes of an IPv6 literal (RFC 4291 text, with `::` and a trailing dotted IPv4).
fn ipv6(host: &str) -> Option<[u8; 16]> {
    let mut words: Vec<u16> = Vec::new();
    let mut gap: Option<usize> = None;
    let (head, tail) = match host.split_once("::") {
        Some((h, t)) => (h, Some(t)),
        None => (host, None),
    };
    let push = |group: &str, words: &mut Vec<u16>, last: bool| -> Option<()> {
        if last && group.contains('.') {
            let v4 = ipv4(group).ok()??;
            words.push((v4 >> 16) as u16);
            words.push(v4 as u16);
            return Some(());
        }
        if group.is_empty() || group.len() > 4 {
            return None;
        }
        words.push(u16::from_str_radix(group, 16).ok()?);
        Some(())
    };
    if !head.is_empty() {
        let groups: Vec<&str> = head.split(':').collect();
        let n = groups.len();
        for (i, g) in groups.into_iter().enumerate() {
            push(g, &mut words, tail.is_none() && i + 1 == n)?;
        }
    }
    if let Some(tail) = tail {
        gap = Some(words.len());
        if !tail.is_empty() {
            let groups: Vec<&str> = tail.split(':').collect();
            let n = groups.len();
            for (i, g) in groups.into_iter().enumerate() {
                push(g, &mut words, i + 1 == n)?;
            }
        }
    }
    let mut full = [0u16; 8];
    match gap {
        Some(at) if words.len() < 8 => {
            let after = words.len() - at;
            full[..at].copy_from_slice(&words[..at]);
            full[8 - after..].copy_from_slice(&words[at..]);
        }
        None if words.len() == 8 => full.copy_from_slice(&words),
        _ => return None,
    }
    let mut bytes = [0u8; 16];
    for (i, w) in full.iter().enumerate() {
        bytes[2 * i..2 * i + 2].copy_from_slice(&w.to_be_bytes());
    }
    Some(bytes)
}

/// Whether an IPv6 address is public: not unspecified, loopback, IPv4-mapped or -compatible to a
/// non-public IPv4, unique-local (fc00::/7), link-local (fe80::/10), site-local (fec0::/10),
/// multicast (ff00::/8) or documentation (2001:db8::/32).
pub fn is_public_ipv6(bytes: [u8; 16]) -> bool {
    let v4 = u32::from_be_bytes([bytes[12], bytes[13], bytes[14], bytes[15]]);
    let zero_prefix = bytes[..10].iter().all(|b| *b == 0);
    if zero_prefix && bytes[10..12] == [0xff, 0xff] {
        return is_public_ipv4(v4);
    }
    if zero_prefix && bytes[10..12] == [0, 0] {
        // ::, ::1 and the deprecated IPv4-compatible form.
        return v4 > 1 && is_public_ipv4(v4);
    }
    !(bytes[0] & 0xfe == 0xfc
        || (bytes[0] == 0xfe && bytes[1] & 0x80 == 0x80)
        || bytes[0] == 0xff
        || bytes[..4] == [0x20, 0x01, 0x0d, 0xb8])
}

/// Checks that `url` is an http(s) URL whose host is public (see the module's documentation).
pub fn check(url: &str) -> Result<(), Refusal> {
    let host = host(url)?;
    if host.contains(':') {
        let bytes = ipv6(&host).ok_or(Refusal::BadHost)?;
        return if is_public_ipv6(bytes) { Ok(()) } else { Err(Refusal::PrivateHost) };
    }
    if let Some(address) = ipv4(&host)? {
        return if is_public_ipv4(address) { Ok(()) } else { Err(Refusal::PrivateHost) };
    }
    if host == "localhost" || host.ends_with(".localhost") {
        return Err(Refusal::PrivateHost);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The attack: name a host on the fetcher's own machine or network, in any spelling an HTTP
    /// client resolves to it.
    #[test]
    fn attack_private_hosts_are_refused_in_every_spelling() {
        for url in [
            "http://127.0.0.1:8700/bundle",
            "http://127.1/",
            "http://2130706433/",
            "http://0x7f000001/",
            "http://0177.0.0.1/",
            "http://0x7f.1/",
            "HTTP://LOCALHOST/",
            "http://localhost./x",
            "http://api.localhost/",
            "http://169.254.169.254/latest/meta-data/",
            "http://10.0.0.5:5432/",
            "http://172.31.255.255/",
            "http://192.168.1.1/",
            "http://100.64.0.1/",
            "http://0.0.0.0/",
            "http://user:pw@127.0.0.1/",
            "http://evil.example@10.1.2.3/",
            "http://[::1]/",
            "http://[::]/",
            "http://[::ffff:127.0.0.1]/",
            "http://[::ffff:7f00:1]/",
            "http://[fe80::1]/",
            "http://[fd00::1]:80/",
            "http://224.0.0.1/",
        ] {
            assert_eq!(check(url), Err(Refusal::PrivateHost), "{url}");
        }
    }

    #[test]
    fn malformed_and_non_http_urls_are_refused() {
        assert_eq!(check("file:///etc/passwd"), Err(Refusal::NotHttp));
        assert_eq!(check("ftp://example.com/"), Err(Refusal::NotHttp));
        assert_eq!(check("/data/train.csv"), Err(Refusal::NotHttp));
        for url in [
            "http:///x",
            "http://%31%32%37.0.0.1/",
            "http://1.2.3.4.5/",
            "http://256.1.1.1/",
            "http://1.2.3.0x100000000/",
            "http://[::1/",
            "http://[1:2:3:4:5:6:7:8:9]/",
            "http://[gggg::1]/",
        ] {
            assert_eq!(check(url), Err(Refusal::BadHost), "{url}");
        }
    }

    #[test]
    fn public_hosts_pass() {
        for url in [
            "https://example.com/data/train.csv",
            "http://bundles.example.org:8700/job/3",
            "https://EXAMPLE.com./",
            "http://8.8.8.8/",
            "http://1.1.1.1:443/",
            "http://172.32.0.1/",
            "http://[2606:4700:4700::1111]/",
            "http://[::ffff:8.8.8.8]/",
            "http://example.com\\@127.0.0.1/",
            "http://user@example.com/",
            "http://localhost.example.com/",
            "http://1.example/",
        ] {
            assert_eq!(check(url), Ok(()), "{url}");
        }
    }
}
