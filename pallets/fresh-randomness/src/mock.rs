//! A minimal runtime for the pallet's tests: randomness fresh after 4 outputs, and a VRF source the
//! tests set block by block.

use crate as pallet_fresh_randomness;
use frame_support::{derive_impl, parameter_types, traits::Hooks};
use sp_runtime::BuildStorage;

type Block = frame_system::mocking::MockBlock<Test>;

frame_support::construct_runtime!(
    pub enum Test {
        System: frame_system,
        FreshRandomness: pallet_fresh_randomness,
    }
);

#[derive_impl(frame_system::config_preludes::TestDefaultConfig)]
impl frame_system::Config for Test {
    type Block = Block;
}

parameter_types! {
    /// What the VRF source holds at the start of the next block (the parent's output).
    pub static ParentOutput: Option<[u8; 32]> = None;
}

impl pallet_fresh_randomness::Config for Test {
    type ParentVrfOutput = ParentOutput;
    type FreshOutputs = frame_support::traits::ConstU32<4>;
}

/// Externalities at block 1, before any output.
pub fn new_test_ext() -> sp_io::TestExternalities {
    let storage = frame_system::GenesisConfig::<Test>::default().build_storage().unwrap();
    let mut ext = sp_io::TestExternalities::new(storage);
    ext.execute_with(|| {
        System::set_block_number(1);
        ParentOutput::set(None);
    });
    ext
}

/// Ends the current block with VRF output `output` (`None`: a block without one, which leaves the
/// source as it was) and starts the next one.
pub fn next_block(output: Option<[u8; 32]>) {
    if output.is_some() {
        ParentOutput::set(output);
    }
    let next = System::block_number() + 1;
    System::set_block_number(next);
    FreshRandomness::on_initialize(next);
}

/// A distinct VRF output for `block` in the world `world`.
pub fn output(world: u8, block: u64) -> [u8; 32] {
    let mut out = [world; 32];
    out[..8].copy_from_slice(&block.to_le_bytes());
    out
}
