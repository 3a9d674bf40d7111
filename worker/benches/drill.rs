//! Proof-of-Drilling throughput (a benchmark, not a test): the machine's peak int8 multiply-add rate
//! (a tight, cache-resident vectorized loop on every core), then the worker's MatmulChain throughput in
//! ut/hour and as a share of that peak, and the reference implementation's on the same task as the
//! baseline, all measured in this run. Usage: `cargo bench -p ergon-worker --bench drill -- [DIM] [LENGTH]`.

use ergon_drill::MatmulChain;
use ergon_worker::drill;

fn main() {
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    let dim: u32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(512);
    let length: u32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(16);
    let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);

    let peak = drill::peak_ops_per_second(threads, 3.0);
    let peak_1 = drill::peak_ops_per_second(1, 2.0);
    println!(
        "peak int8 multiply-add: {:.2} Gop/s on {threads} threads ({:.2} Gop/s on one) = {:.1} ut/hour",
        peak / 1e9,
        peak_1 / 1e9,
        peak / ergon_drill::OPS_PER_UT as f64 * 3600.0
    );

    let task = MatmulChain { seed: [0x5e; 32], dim, length };
    let fast = drill::run(&task, threads).expect("valid task");
    println!(
        "worker  MatmulChain dim={dim} length={length}: {:.3} s, {:.2} Gop/s, {:.3} ut/hour = {:.1}% of peak",
        fast.seconds,
        fast.ops_per_second() / 1e9,
        fast.ut_per_hour(),
        100.0 * fast.ops_per_second() / peak
    );

    // Baseline: the reference (naive, one thread) on a task a tenth of the size.
    let small = MatmulChain { seed: [0x5e; 32], dim: dim.min(256), length: 2 };
    let started = std::time::Instant::now();
    let reference = small.run_reference();
    let reference_rate = small.ops() as f64 / started.elapsed().as_secs_f64();
    let check = drill::run(&small, threads).expect("valid task");
    assert_eq!(check.result, reference, "fast path and reference disagree");
    println!(
        "reference (naive, 1 thread) dim={} length=2: {:.2} Gop/s; worker / reference = {:.1}x",
        small.dim,
        reference_rate / 1e9,
        fast.ops_per_second() / reference_rate
    );
}
