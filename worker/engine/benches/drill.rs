//! Proof-of-Drilling throughput (a benchmark, not a test): the machine's peak int8 multiply-add rate
//! (a tight, cache-resident vectorized loop on every core), then the worker's MatmulChain throughput in
//! ut/hour and as a share of that peak, and the reference implementation's on the same task as the
//! baseline, all measured in this run; then the same for quantized inference (an MLP 784-256-128-10
//! over 20 000 random samples). Usage: `cargo bench -p ergon-engine --bench drill -- [DIM] [LENGTH]`.

use ergon_drill::MatmulChain;
use ergon_engine::drill;

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

    // The device path (candle f32 products over exact inner blocks), here on the CPU device, against
    // the peak of exact f32 products on it.
    let cpu = candle_core::Device::Cpu;
    let peak_f32 = drill::peak_f32_ops_per_second(&cpu, 3.0).expect("f32 products run");
    let device = drill::run_on_device(&task, &cpu).expect("valid task");
    assert_eq!(device.result, fast.result, "device path and fast path disagree");
    println!(
        "peak exact f32 products (candle CPU, 1024x1024): {:.2} Gop/s = {:.1} ut/hour",
        peak_f32 / 1e9,
        peak_f32 / ergon_drill::OPS_PER_UT as f64 * 3600.0
    );
    println!(
        "device path (candle CPU) dim={dim} length={length}: {:.3} s, {:.2} Gop/s, {:.3} ut/hour = {:.1}% of the f32 peak, {:.2}x the int8 path",
        device.seconds,
        device.ops_per_second() / 1e9,
        device.ut_per_hour(),
        100.0 * device.ops_per_second() / peak_f32,
        device.ops_per_second() / fast.ops_per_second()
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

    let widths = [784, 256, 128, 10];
    let (task, model, dataset) = drill::random_inference(7, &widths, 20_000);
    let fast = drill::run_inference(&task, &model, &dataset, threads);
    assert!(fast.invalid.is_none(), "the generated files match their task");
    println!(
        "worker  QuantizedInference {widths:?} x 20000 samples: {:.3} s, {:.2} Gop/s, {:.3} ut/hour = {:.1}% of peak",
        fast.seconds,
        fast.ops_per_second() / 1e9,
        fast.ut_per_hour(),
        100.0 * fast.ops_per_second() / peak
    );
    let (small, model, dataset) = drill::random_inference(7, &widths, 2_000);
    let started = std::time::Instant::now();
    let reference = small.run_reference(&model, &dataset);
    let reference_rate = small.ops() as f64 / started.elapsed().as_secs_f64();
    let check = drill::run_inference(&small, &model, &dataset, threads);
    assert_eq!(check.result, reference, "fast path and reference disagree");
    println!(
        "reference (1 thread) 2000 samples: {:.2} Gop/s; worker / reference = {:.1}x",
        reference_rate / 1e9,
        fast.ops_per_second() / reference_rate
    );
}
