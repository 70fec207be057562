//! Command line: flags in the Prometheus exporters' style. Flags override the config file,
//! which overrides the defaults.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::config::{Config, ConfigError};
use crate::settings::{
    scope, Given, GlobalFlags, LiveFlags, Overrides, PaceFlags, ServeFlags, SourceFlags,
};

#[derive(Debug, Parser)]
#[command(
    name = "gpumem-exporter",
    version,
    about = "GPU memory exporter for Prometheus: NVML plus allocator reports, leak slope, seconds-to-OOM, fragmentation, imbalance",
    long_about = None,
    // Without a command the exporter serves: its flags are the top level's, and each command
    // lists only the flags it reads.
    args_conflicts_with_subcommands = false
)]
pub struct Cli {
    #[command(flatten, next_help_heading = "Global options")]
    pub global: GlobalArgs,

    #[command(flatten, next_help_heading = "Options (serve)")]
    pub serve: ServeFlags,

    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Flags every command reads.
#[derive(Debug, Args, Default, Clone)]
pub struct GlobalArgs {
    /// Configuration file (YAML) for everything the flags do not cover.
    #[arg(long = "config", global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,

    #[command(flatten)]
    pub logging: GlobalFlags,

    /// Print the effective configuration as YAML and exit.
    #[arg(long = "print-config", global = true)]
    pub print_config: bool,
}

/// What the configuration of a run is built from: the file, and the flags of every level of
/// the command line.
#[derive(Debug, Default, Clone)]
pub struct CommonArgs {
    pub config: Option<PathBuf>,
    pub flags: Overrides,
}

impl Cli {
    /// The flags of the top level and of the command together; the command's win. Flags
    /// before a command name count where the command reads them (`gpumem-exporter --source
    /// sim oom`) and are refused where it does not, rather than ignored.
    pub fn common(&self) -> Result<CommonArgs, ConfigError> {
        let (name, reads, own): (&str, u8, &[Given]) = match &self.command {
            None => ("serve", ServeFlags::READS, &[]),
            Some(Command::Serve(a)) => ("serve", ServeFlags::READS, a.given()),
            Some(Command::Top(a)) => ("top", LiveFlags::READS, a.flags.given()),
            Some(Command::Replay(a)) => ("replay", PaceFlags::READS, a.flags.given()),
            Some(Command::Profile(a)) => ("profile", SourceFlags::READS, a.flags.given()),
            Some(Command::Oom(a)) => ("oom", SourceFlags::READS, a.flags.given()),
            Some(Command::Leak(a)) => ("leak", SourceFlags::READS, a.flags.given()),
            Some(Command::Fragment(a)) => ("fragment", SourceFlags::READS, a.flags.given()),
            Some(Command::Compare(_)) => ("compare", 0, &[]),
            Some(Command::Sweep(_)) => ("sweep", 0, &[]),
        };
        let levels = [self.global.logging.given(), self.serve.given(), own];
        Ok(CommonArgs {
            config: self.global.config.clone(),
            flags: Overrides::gather(&levels, name, reads | scope::GLOBAL)?,
        })
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve /metrics (the default when no command is given).
    Serve(ServeFlags),
    /// Run the engine over recorded traces as fast as the CPU goes and write a timeline.
    Replay(ReplayArgs),
    /// Sample for a while, then write a memory profile report (JSON) and a chart.
    Profile(ProfileArgs),
    /// Assess out-of-memory risk per GPU, over a duration or until Ctrl-C.
    Oom(OomArgs),
    /// Look for leaking processes: an allocated floor that keeps rising.
    Leak(LeakArgs),
    /// Analyse allocator fragmentation over time.
    Fragment(FragmentArgs),
    /// Compare two profile reports.
    Compare(CompareArgs),
    /// Table and heatmap of peak memory across profile reports tagged with two parameters.
    Sweep(SweepArgs),
    /// Live terminal view of GPUs and their processes.
    Top(TopArgs),
}

/// How long and how often the report commands sample, and which GPUs they look at.
#[derive(Debug, Args, Clone, Default)]
pub struct SamplingArgs {
    /// Seconds to sample (trace seconds for a replay source; 90, 2.5, 2m). [default: 60, or
    /// the whole trace for a replay source]
    #[arg(long, value_name = "SECONDS", value_parser = crate::units::parse_seconds, allow_hyphen_values = true)]
    pub duration: Option<f64>,
    /// Seconds between samples (overrides --sample-interval; a replay source takes every
    /// recorded sample unless this is given).
    #[arg(long, value_name = "SECONDS", value_parser = crate::units::parse_interval, allow_hyphen_values = true)]
    pub interval: Option<Duration>,
    /// GPU indices to report on. [default: all]
    #[arg(long, value_name = "INDEX", num_args = 1..)]
    pub devices: Vec<u32>,
}

#[derive(Debug, Args)]
pub struct ProfileArgs {
    #[command(flatten)]
    pub flags: SourceFlags,
    #[command(flatten)]
    pub sampling: SamplingArgs,
    /// Where to write the report (JSON); - for stdout.
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Chart of used, reserved and allocated memory over time: a .png or .svg file (repeatable).
    #[arg(long, value_name = "FILE")]
    pub plot: Vec<PathBuf>,
    /// Label the report, e.g. --tag batch_size=32 (repeatable); `sweep` and `compare` read them.
    #[arg(long = "tag", value_name = "KEY=VALUE", value_parser = parse_tag)]
    pub tags: Vec<(String, String)>,
}

#[derive(Debug, Args)]
pub struct OomArgs {
    #[command(flatten)]
    pub flags: SourceFlags,
    #[command(flatten)]
    pub sampling: SamplingArgs,
    /// Used percent of a GPU at which the risk is at least high (medium starts 10 points lower).
    /// [default: the configuration's analysis.risk]
    #[arg(long, value_name = "PERCENT", allow_hyphen_values = true)]
    pub threshold: Option<f64>,
    /// Keep watching until Ctrl-C (or the end of a replayed trace), printing each change of level.
    #[arg(long, conflicts_with = "duration")]
    pub monitor: bool,
    /// Where to write the report (JSON); - for stdout.
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct LeakArgs {
    #[command(flatten)]
    pub flags: SourceFlags,
    #[command(flatten)]
    pub sampling: SamplingArgs,
    /// Floor growth in MiB per minute above which a process leaks. [default: 10]
    #[arg(long, value_name = "MIB_PER_MIN", allow_hyphen_values = true)]
    pub threshold: Option<f64>,
    /// Where to write the report (JSON); - for stdout.
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct FragmentArgs {
    #[command(flatten)]
    pub flags: SourceFlags,
    #[command(flatten)]
    pub sampling: SamplingArgs,
    /// Where to write the report (JSON); - for stdout.
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Chart of the fragmentation ratios over time: a .png or .svg file (repeatable).
    #[arg(long, value_name = "FILE")]
    pub plot: Vec<PathBuf>,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The baseline profile report.
    #[arg(value_name = "A.json")]
    pub a: PathBuf,
    /// The profile report to compare with it.
    #[arg(value_name = "B.json")]
    pub b: PathBuf,
    /// Also write the comparison as JSON to this file; - for stdout.
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Print JSON on stdout instead of the table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct SweepArgs {
    /// Profile reports, each tagged with the --x and --y keys.
    #[arg(required = true, value_name = "REPORT.json")]
    pub reports: Vec<PathBuf>,
    /// Tag whose values make the columns.
    #[arg(long, value_name = "TAG")]
    pub x: String,
    /// Tag whose values make the rows.
    #[arg(long, value_name = "TAG")]
    pub y: String,
    /// Which peak to tabulate: used (NVML), allocated or reserved (allocator).
    #[arg(long, value_name = "METRIC", default_value = "used", value_parser = ["used", "allocated", "reserved"])]
    pub metric: String,
    /// Heatmap: a .png or .svg file (repeatable).
    #[arg(long, value_name = "FILE")]
    pub plot: Vec<PathBuf>,
    /// Where to write the table as JSON; - for stdout.
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct TopArgs {
    #[command(flatten)]
    pub flags: LiveFlags,
    /// Seconds between screen refreshes.
    #[arg(long, value_name = "SECONDS", default_value = "1", value_parser = crate::units::parse_interval)]
    pub refresh: Duration,
}

#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// Trace files (JSON Lines).
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Where to write the timeline (JSON Lines, one object per second of trace time); - for
    /// stdout. Without it, the verdict is printed for a person instead.
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Write the verdict as JSON: when the first allocation failed (`oom_t`), from when the
    /// exporter warned and paged without a break up to it (`warning_from_t`, `critical_from_t`
    /// and their leads), the ETA 60, 30 and 10 s before, per GPU too.
    #[arg(long, value_name = "FILE")]
    pub summary: Option<PathBuf>,
    /// Draw the recording (.png or .svg): device used and free, each process, the failing
    /// request, the risk level as bands, and the ETA against the time that was really left.
    #[arg(long, value_name = "FILE")]
    pub chart: Option<PathBuf>,
    /// Write only these metric families to the timeline (names as `/metrics` shows them,
    /// comma-separated); every family by default.
    #[arg(long, value_name = "NAME,...", value_delimiter = ',')]
    pub metrics: Vec<String>,
    #[command(flatten)]
    pub flags: PaceFlags,
}

fn parse_tag(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
        _ => Err(format!("`{s}` is not KEY=VALUE")),
    }
}

impl CommonArgs {
    /// Defaults, then the file, then the flags; validated.
    pub fn effective_config(&self) -> Result<Config, ConfigError> {
        let mut c = match &self.config {
            Some(p) => Config::from_file(p)?,
            None => Config::default(),
        };
        self.flags.apply(&mut c)?;
        c.validate().map_err(|e| self.flags.name_flag(e))?;
        Ok(c)
    }

    /// Name the flag where a bad value came from one.
    pub fn name_flag(&self, e: ConfigError) -> ConfigError {
        self.flags.name_flag(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SourceSpec;

    fn parse(args: &[&str]) -> Cli {
        Cli::try_parse_from(std::iter::once("gpumem-exporter").chain(args.iter().copied())).unwrap()
    }

    fn config(args: &[&str]) -> Result<Config, ConfigError> {
        parse(args).common()?.effective_config()
    }

    #[test]
    fn flags_override_defaults() {
        let c = parse(&[
            "--source",
            "sim",
            "--sample-interval",
            "250ms",
            "--web.listen-address",
            "127.0.0.1:1",
        ])
        .common()
        .unwrap()
        .effective_config()
        .unwrap();
        assert_eq!(c.source, SourceSpec::Sim);
        assert_eq!(c.sample_interval, Duration::from_millis(250));
        assert_eq!(c.web.listen_address, "127.0.0.1:1");
    }

    #[test]
    fn a_bad_flag_value_names_the_flag() {
        // Out of range, negative too: the command line says the range.
        for v in ["5ms", "-1s", "-1"] {
            let e = Cli::try_parse_from(["gpumem-exporter", "--sample-interval", v])
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("--sample-interval") && e.contains("accepted: 10ms..60s"),
                "{v}: {e}"
            );
        }
        let e = config(&["--replay.speed", "-2"]).unwrap_err();
        assert_eq!(e.field, "--replay.speed");
        let e = config(&["--source", "gpu"]).unwrap_err();
        assert_eq!(e.field, "--source");
        assert!(e.to_string().contains("sim"));
    }

    #[test]
    fn scenarios_flag() {
        let c = config(&["--sim.scenarios", "steady,oom"]).unwrap();
        assert_eq!(c.sim.gpus.len(), 2);
        let e = config(&["--sim.scenarios", "steady,nope"]).unwrap_err();
        assert!(e.message.contains("nope"));
    }

    #[test]
    fn a_commands_flags_win_and_source_flags_before_it_still_count() {
        let c = config(&["--source", "sim", "oom", "--sample-interval", "2s"]).unwrap();
        assert_eq!(
            (c.source.kind(), c.sample_interval),
            ("sim", Duration::from_secs(2))
        );
        let c = config(&["--sample-interval", "3s", "serve", "--source", "sim"]).unwrap();
        assert_eq!(
            (c.source.kind(), c.sample_interval),
            ("sim", Duration::from_secs(3))
        );
        let c = config(&["--log.format", "json", "top", "--replay.speed", "4"]).unwrap();
        assert_eq!((c.log_format.as_str(), c.replay.speed), ("json", 4.0));
        let c = config(&["replay", "t.jsonl", "-o", "-", "--sample-interval", "5s"]).unwrap();
        assert_eq!(c.sample_interval, Duration::from_secs(5));
    }

    #[test]
    fn a_serve_flag_before_another_command_is_refused_not_ignored() {
        let e = config(&["--web.listen-address", ":1", "oom"]).unwrap_err();
        assert_eq!(e.field, "--web.listen-address");
        assert!(e.message.contains("`oom`"), "{e}");
        // And after it, clap refuses it as unknown.
        let cli = Cli::try_parse_from(["gpumem-exporter", "oom", "--web.listen-address", ":1"]);
        assert!(cli.is_err());
    }

    #[test]
    fn tags() {
        assert_eq!(
            parse_tag("batch_size=32").unwrap(),
            ("batch_size".into(), "32".into())
        );
        assert_eq!(parse_tag("note=a=b").unwrap().1, "a=b");
        assert!(parse_tag("=3").is_err());
        assert!(parse_tag("novalue").is_err());
    }
}
