//! A daemon on a live chain fetches only public http(s) URLs (issue 34, item 8: SSRF). Its own
//! test binary: the switch is process-wide.

use ergon_engine::{data, Error};

/// The attack: a job's data (or a bundle) named as a local file or a host on the verifier's own
/// machine or network. Once the daemon has switched to public-only fetching, none is read or asked.
#[test]
fn attack_local_files_and_private_hosts_are_refused_once_public_only() {
    // Before the switch (the CLI, test networks) a path and loopback are fetched as named.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("secret.txt");
    std::fs::write(&file, b"local secret").unwrap();
    assert_eq!(data::fetch(file.to_str().unwrap()).unwrap(), b"local secret");

    data::fetch_public_only();
    let uris = [
        file.display().to_string(),
        format!("file://{}", file.display()),
        "http://127.0.0.1:9/data.csv".to_string(),
        "http://169.254.169.254/latest/meta-data/".to_string(),
        "http://2130706433/".to_string(),
        "http://[::1]:8700/bundle/manifest.json".to_string(),
        "http://10.0.0.5/train-images".to_string(),
    ];
    for uri in uris {
        let err = data::fetch(&uri).expect_err(&uri);
        assert!(
            matches!(&err, Error::Download { reason, .. } if reason.starts_with("refused")),
            "{uri}: {err}"
        );
    }

    // A name that passes the URL check but resolves to this machine: its own host name, which
    // /etc/hosts maps to loopback on most machines (a public DNS name pointing at a private
    // address is the same attack). A listener there shows the refusal is not a failed connection.
    let Some(name) = own_name_resolving_to_loopback() else {
        eprintln!("skipped: this machine's host name does not resolve to loopback");
        return;
    };
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let uri = format!("http://{name}:{}/data.csv", listener.local_addr().unwrap().port());
    assert_eq!(ergon_protocol::url::check(&uri), Ok(()), "the name itself passes the check");
    let err = data::fetch(&uri).expect_err(&uri);
    assert!(
        matches!(&err, Error::Download { reason, .. }
            if reason.starts_with("refused") && reason.contains("127.0.0.1")),
        "{uri}: {err}"
    );
}

/// This machine's host name, if it is a single name that resolves to 127.0.0.0/8 only.
fn own_name_resolving_to_loopback() -> Option<String> {
    use std::net::ToSocketAddrs;
    let name = std::fs::read_to_string("/etc/hostname").ok()?.trim().to_string();
    if name.is_empty() || name.contains(['/', ':']) || name.eq_ignore_ascii_case("localhost") {
        return None;
    }
    let addresses: Vec<_> = (name.as_str(), 80).to_socket_addrs().ok()?.collect();
    let loopback = !addresses.is_empty()
        && addresses.iter().all(|a| matches!(a.ip(), std::net::IpAddr::V4(v4) if v4.is_loopback()));
    loopback.then_some(name)
}
