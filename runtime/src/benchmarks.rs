//! The pallets whose weights are measured by `ergon-node benchmark pallet` (built with
//! `--features runtime-benchmarks`; see `scripts/bench-weights.sh`).

frame_benchmarking::define_benchmarks!(
    [frame_benchmarking, BaselineBench::<Runtime>]
    [frame_system, SystemBench::<Runtime>]
    [pallet_balances, Balances]
    [pallet_timestamp, Timestamp]
    [pallet_trainer_staking, TrainerStaking]
    [pallet_job_market, JobMarket]
    [pallet_drilling, Drilling]
    [pallet_im_online, ImOnline]
);
