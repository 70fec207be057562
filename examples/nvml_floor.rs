//! The NVML floor: a plain loop of exactly the NVML calls the exporter makes per sample
//! (memory info v2, compute and graphics process lists, for every GPU), with its CPU time.
//! `bench/nvml_overhead.sh` runs it beside the exporter on a real GPU.
//!
//! cargo build --release --example nvml_floor
//! nvml_floor <seconds> <interval-ms>

use nvml_wrapper::Nvml;

fn cpu_seconds() -> f64 {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let seconds: f64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(10.0);
    let interval_ms: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(10);
    let nvml = Nvml::init().expect("NVML");
    let n = nvml.device_count().expect("device count");
    let devices: Vec<_> = (0..n).map(|i| nvml.device_by_index(i).unwrap()).collect();
    let start_cpu = cpu_seconds();
    let start = std::time::Instant::now();
    let mut iterations = 0u64;
    let mut busy = std::time::Duration::ZERO;
    while start.elapsed().as_secs_f64() < seconds {
        let t = std::time::Instant::now();
        for d in &devices {
            std::hint::black_box(d.memory_info().unwrap());
            std::hint::black_box(d.running_compute_processes().unwrap());
            std::hint::black_box(d.running_graphics_processes().unwrap_or_default());
        }
        busy += t.elapsed();
        iterations += 1;
        std::thread::sleep(std::time::Duration::from_millis(interval_ms));
    }
    let cpu = cpu_seconds() - start_cpu;
    println!(
        "{{\"gpus\":{n},\"iterations\":{iterations},\"interval_ms\":{interval_ms},\"cpu_seconds\":{cpu:.6},\"cpu_us_per_sample\":{:.2},\"wall_us_per_sample_busy\":{:.2}}}",
        cpu / iterations as f64 * 1e6,
        busy.as_secs_f64() / iterations as f64 * 1e6
    );
}
