//! Genesis presets: `development` (Alice alone) and `local_testnet` (Alice, Bob, Charlie, Dave).
//!
//! The node builds its chain specs from these presets, so the runtime is the single source of truth for
//! what a fresh chain contains.

use alloc::{vec, vec::Vec};
use serde_json::Value;
use sp_genesis_builder::{self, PresetId};
use sp_keyring::{Ed25519Keyring, Sr25519Keyring};

use crate::{units::ERG, AccountId, Balance, SessionKeys, BABE_GENESIS_EPOCH_CONFIG};

/// Every well-known dev account starts with this much.
const ENDOWMENT: Balance = 1_000_000 * ERG;

/// What each genesis validator has bonded (the minimum is 1 000 ERG).
const GENESIS_BOND: Balance = 10_000 * ERG;

/// The session keys of a well-known dev account: the sr25519 key `//Name` for BABE, availability
/// attestations (`ergn`) and heartbeats (`imon`), the ed25519 key `//Name` for GRANDPA (what `ergon-node --alice` puts in its
/// keystore).
fn dev_session_keys(who: Sr25519Keyring) -> (AccountId, AccountId, SessionKeys) {
    let ed = ed25519_twin(who);
    let keys = SessionKeys {
        babe: who.public().into(),
        grandpa: ed.public().into(),
        ergon: who.public().into(),
        im_online: who.public().into(),
    };
    (who.to_account_id(), who.to_account_id(), keys)
}

/// The ed25519 dev key of the same name as `who` (`//Alice`'s GRANDPA key for Alice).
pub fn ed25519_twin(who: Sr25519Keyring) -> Ed25519Keyring {
    Ed25519Keyring::iter()
        .find(|k| <&'static str>::from(*k) == <&'static str>::from(who))
        .expect("every sr25519 dev keyring entry has an ed25519 twin; qed")
}

/// One ut in micro-ut.
const UT: u128 = 1_000_000;

/// A genesis config in JSON: the given validators (bonded, with dev session keys) and their initial ECP
/// in ut (seeded as equal D and T, so ECP = 0.4·D + 0.6·T = the figure given), the endowed accounts and
/// root. Validators must be among the endowed accounts (their bond is held from that balance).
fn testnet_genesis(
    validators: Vec<(Sr25519Keyring, u128)>,
    endowed: Vec<AccountId>,
    root: AccountId,
) -> Value {
    let trainers: Vec<_> =
        validators.iter().map(|(k, ecp)| (k.to_account_id(), ecp * UT, ecp * UT)).collect();
    let stakers: Vec<_> =
        validators.iter().map(|(k, _)| (k.to_account_id(), GENESIS_BOND)).collect();
    let session_keys: Vec<_> = validators.into_iter().map(|(k, _)| dev_session_keys(k)).collect();
    serde_json::json!({
        "balances": {
            "balances": endowed.into_iter().map(|a| (a, ENDOWMENT)).collect::<Vec<_>>(),
        },
        "babe": {
            "epochConfig": BABE_GENESIS_EPOCH_CONFIG,
        },
        "session": {
            "keys": session_keys,
        },
        "sudo": {
            "key": Some(root),
        },
        "computePower": {
            "trainers": trainers,
        },
        "trainerStaking": {
            "stakers": stakers,
        },
        // Test networks run every service on one host: offchain workers fetch from loopback; a
        // handful of verifiers (the least a round takes, two) may serve a job.
        "jobMarket": {
            "allowPrivateUrls": true,
            "minVerifierPool": 2,
        },
    })
}

/// The `development` preset: Alice is the only validator and root.
pub fn development_config_genesis() -> Value {
    testnet_genesis(
        vec![(Sr25519Keyring::Alice, 1)],
        Sr25519Keyring::well_known().map(|k| k.to_account_id()).collect(),
        Sr25519Keyring::Alice.to_account_id(),
    )
}

/// The `local_testnet` preset: Alice, Bob, Charlie and Dave validate (ECP 1, 2, 4, 8 ut); Alice is root.
pub fn local_config_genesis() -> Value {
    testnet_genesis(
        // Unequal ECP, 1 : 2 : 4 : 8, so authorship weighting is visible from block 1.
        vec![
            (Sr25519Keyring::Alice, 1),
            (Sr25519Keyring::Bob, 2),
            (Sr25519Keyring::Charlie, 4),
            (Sr25519Keyring::Dave, 8),
        ],
        Sr25519Keyring::well_known().map(|k| k.to_account_id()).collect(),
        Sr25519Keyring::Alice.to_account_id(),
    )
}

/// The JSON of the preset called `id`, if there is one.
pub fn get_preset(id: &PresetId) -> Option<Vec<u8>> {
    let patch = match id.as_ref() {
        sp_genesis_builder::DEV_RUNTIME_PRESET => development_config_genesis(),
        sp_genesis_builder::LOCAL_TESTNET_RUNTIME_PRESET => local_config_genesis(),
        _ => return None,
    };
    Some(
        serde_json::to_string(&patch)
            .expect("serialization to json is expected to work. qed.")
            .into_bytes(),
    )
}

/// The names of the presets this runtime provides.
pub fn preset_names() -> Vec<PresetId> {
    vec![
        PresetId::from(sp_genesis_builder::DEV_RUNTIME_PRESET),
        PresetId::from(sp_genesis_builder::LOCAL_TESTNET_RUNTIME_PRESET),
    ]
}
