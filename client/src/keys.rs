//! Signing keys: from a key file (what an operator deploys) or a well-known dev URI (`//Alice`,
//! development chains only).

use std::{path::Path, str::FromStr};

use subxt_signer::{sr25519::Keypair, SecretUri};

use crate::error::{Error, Result};

/// The sr25519 key pair an account signs with.
pub type Signer = Keypair;

/// Reads a key from `path`: its first line is a secret URI (a BIP-39 phrase with optional
/// `//hard/soft` derivations and `///password`, or a 32-byte seed as `0x` hex). The file should be
/// readable by its owner only; the key never appears in logs or errors.
pub fn from_file(path: &Path) -> Result<Signer> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::Key(format!("reading {}: {e}", path.display())))?;
    let line = text.lines().map(str::trim).find(|l| !l.is_empty() && !l.starts_with('#'));
    let line = line.ok_or_else(|| Error::Key(format!("{} holds no key", path.display())))?;
    from_uri(line).map_err(|_| {
        Error::Key(format!(
            "{} does not hold a secret URI (a mnemonic phrase, or 0x and 64 hex digits)",
            path.display()
        ))
    })
}

/// A key from a secret URI. For development only when it is a well-known one like `//Alice`.
pub fn from_uri(uri: &str) -> Result<Signer> {
    let uri = SecretUri::from_str(uri).map_err(|e| Error::Key(e.to_string()))?;
    Keypair::from_uri(&uri).map_err(|e| Error::Key(e.to_string()))
}

/// A well-known development key: `//Alice`, `//Bob`, … (anything else is refused, so a real key
/// never goes through a command-line flag).
pub fn dev(uri: &str) -> Result<Signer> {
    let name = uri.strip_prefix("//").unwrap_or("");
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric()) {
        return Err(Error::Key(format!(
            "{uri:?} is not a well-known development key like //Alice (use a key file)"
        )));
    }
    from_uri(uri)
}

/// The account's raw 32 bytes.
pub fn account_bytes(signer: &Signer) -> [u8; 32] {
    signer.public_key().0
}

/// The account in SS58 (prefix 42), as polkadot.js shows it.
pub fn address(signer: &Signer) -> String {
    signer.public_key().to_account_id().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dev_keys_are_the_well_known_ones_and_nothing_else() {
        let alice = dev("//Alice").unwrap();
        assert_eq!(address(&alice), "5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQY");
        assert!(
            dev("bottom drive obey lake curtain smoke basket hold race lonely fit walk").is_err()
        );
        assert!(dev("//").is_err());
    }

    #[test]
    fn a_key_file_holds_a_phrase_or_a_seed() {
        let dir = std::env::temp_dir().join(format!("ergon-key-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("key");
        std::fs::write(&file, "# Bob\n//Bob\n").unwrap();
        assert_eq!(address(&from_file(&file).unwrap()), address(&dev("//Bob").unwrap()));
        std::fs::write(&file, "not a key at all").unwrap();
        let err = from_file(&file).unwrap_err().to_string();
        assert!(
            err.contains("does not hold a secret URI") && !err.contains("not a key at all"),
            "{err}"
        );
        assert!(from_file(&dir.join("missing")).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
