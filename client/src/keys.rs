//! Signing keys: from a key file (what an operator deploys) or a well-known dev URI (`//Alice`,
//! development chains only).

use std::{path::Path, str::FromStr};

use subxt_signer::{sr25519::Keypair, SecretUri};

use crate::error::{Error, Result};

/// The sr25519 key pair an account signs with.
pub type Signer = Keypair;

/// Reads a key from `path`: its first line is a secret URI (a BIP-39 phrase with optional
/// `//hard/soft` derivations and `///password`, or a 32-byte seed as `0x` hex). A file that its
/// group or others may access is refused, as ssh refuses such a private key: on a shared machine it
/// is as good as published. The key never appears in logs or errors.
pub fn from_file(path: &Path) -> Result<Signer> {
    check_private(path)?;
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

/// Refuses a key file with any permission for its group or others (Unix; elsewhere the file's ACLs
/// are the operator's business).
fn check_private(path: &Path) -> Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(path)
            .map_err(|e| Error::Key(format!("reading {}: {e}", path.display())))?
            .permissions()
            .mode();
        if mode & 0o077 != 0 {
            return Err(Error::Key(format!(
                "{} is accessible to its group or others (mode {:03o}): run `chmod 600 {}`",
                path.display(),
                mode & 0o777,
                path.display()
            )));
        }
    }
    #[cfg(not(unix))]
    let _ = path;
    Ok(())
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
        private(&file);
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

    fn private(file: &Path) {
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
    }

    /// A key file the group or others can read (or write: they could swap the key) is refused
    /// before it is read, and the error says how to fix it (issue 34).
    #[cfg(unix)]
    #[test]
    fn a_key_file_others_can_access_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("ergon-key-mode-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("key");
        std::fs::write(&file, "//Bob\n").unwrap();
        for mode in [0o644, 0o640, 0o604, 0o620, 0o660] {
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).unwrap();
            let err = from_file(&file).unwrap_err().to_string();
            assert!(err.contains("chmod 600") && err.contains(&format!("{mode:03o}")), "{err}");
        }
        for mode in [0o600, 0o400] {
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).unwrap();
            assert!(from_file(&file).is_ok(), "mode {mode:o}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
