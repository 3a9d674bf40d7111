//! The bundle's Merkle tree (SHA-256, domain-separated leaves and nodes, inclusion proofs): the same
//! code the runtime's availability offchain worker runs, from `ergon-bundle`.

pub use ergon_bundle::merkle::*;
