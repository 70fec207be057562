//! Command line: flags in the Prometheus exporters' style. Flags override the config file,
//! which overrides the defaults.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::config::{Config, ConfigError, SimGpuConfig, SourceSpec};

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
    pub serve: ServeArgs,

    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Flags every command reads.
#[derive(Debug, Args, Default, Clone)]
pub struct GlobalArgs {
    /// Configuration file (YAML) for everything the flags do not cover.
    #[arg(long = "config", global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Log level: error, warn, info, debug, trace. [default: info]
    #[arg(long = "log.level", global = true, value_name = "LEVEL")]
    pub log_level: Option<String>,

    /// Log format: logfmt or json. [default: logfmt]
    #[arg(long = "log.format", global = true, value_name = "FORMAT")]
    pub log_format: Option<String>,

    /// Print the effective configuration as YAML and exit.
    #[arg(long = "print-config", global = true)]
    pub print_config: bool,
}

/// How often to sample, and how replayed allocator reports are paced.
#[derive(Debug, Args, Default, Clone)]
pub struct PaceArgs {
    /// Time between samples, 10ms..60s. [default: 1s]
    #[arg(long = "sample-interval", value_name = "DURATION", value_parser = crate::units::parse_duration)]
    pub sample_interval: Option<Duration>,

    /// Seconds between a replayed process's allocator reports (the client's rate; 0 sends every
    /// recorded sample). [default: 1s]
    #[arg(long = "replay.report-interval", value_name = "DURATION", value_parser = crate::units::parse_duration)]
    pub replay_report_interval: Option<Duration>,
}

/// Where samples come from: the commands that sample a source read these.
#[derive(Debug, Args, Default, Clone)]
pub struct SourceArgs {
    /// Where to sample: nvml, sim, or replay:<file>[,<file>...]. [default: nvml]
    #[arg(long = "source", value_name = "SOURCE")]
    pub source: Option<String>,

    #[command(flatten)]
    pub pace: PaceArgs,

    /// Simulator scenarios, one GPU each: steady, leak, oom, frag, shared, processes, churn, idle, mig.
    #[arg(long = "sim.scenarios", value_name = "LIST", value_delimiter = ',')]
    pub sim_scenarios: Option<Vec<String>>,
}

/// A source followed as it happens (`serve`, `top`).
#[derive(Debug, Args, Default, Clone)]
pub struct LiveArgs {
    #[command(flatten)]
    pub source: SourceArgs,

    /// Replay speed: 1 is real time, 10 ten times faster. [default: 1]
    #[arg(long = "replay.speed", value_name = "FACTOR")]
    pub replay_speed: Option<f64>,
}

/// What `serve` (and the exporter without a command) reads.
#[derive(Debug, Args, Default, Clone)]
pub struct ServeArgs {
    #[command(flatten)]
    pub live: LiveArgs,

    /// Address to serve metrics on. [default: :10049]
    #[arg(long = "web.listen-address", value_name = "ADDR")]
    pub listen_address: Option<String>,

    /// Path under which to expose metrics. [default: /metrics]
    #[arg(long = "web.telemetry-path", value_name = "PATH")]
    pub telemetry_path: Option<String>,

    /// Web config file (exporter-toolkit format) for TLS and basic auth on the web endpoints.
    #[arg(long = "web.config.file", value_name = "FILE")]
    pub web_config_file: Option<PathBuf>,

    /// Unix socket for allocator reports; empty turns it off. [default: /run/gpumem/ingest.sock]
    #[arg(long = "ingest.socket", value_name = "PATH", value_parser = parse_path)]
    pub ingest_socket: Option<PathBuf>,

    /// Permission bits of the ingest socket, in octal. [default: 0666]
    #[arg(long = "ingest.socket-mode", value_name = "MODE")]
    pub ingest_socket_mode: Option<String>,

    /// Plain-HTTP ingest on this TCP address (loopback only unless --ingest.allow-remote). [default: off]
    #[arg(long = "ingest.listen-address", value_name = "ADDR")]
    pub ingest_listen_address: Option<String>,

    /// Allow TCP ingest on a non-loopback address (reports over TCP are not authenticated).
    #[arg(long = "ingest.allow-remote")]
    pub ingest_allow_remote: bool,

    /// Pod labels on per-process series: auto (on inside a pod), on, off. [default: auto]
    #[arg(long = "kubernetes.attribution", value_name = "MODE", value_parser = ["auto", "on", "off"])]
    pub kubernetes_attribution: Option<String>,
}

impl ServeArgs {
    /// Flags only `serve` reads, given at the top level: a report command would ignore them.
    fn serve_only_flags(&self) -> Vec<&'static str> {
        [
            (self.listen_address.is_some(), "--web.listen-address"),
            (self.telemetry_path.is_some(), "--web.telemetry-path"),
            (self.web_config_file.is_some(), "--web.config.file"),
            (self.ingest_socket.is_some(), "--ingest.socket"),
            (self.ingest_socket_mode.is_some(), "--ingest.socket-mode"),
            (
                self.ingest_listen_address.is_some(),
                "--ingest.listen-address",
            ),
            (self.ingest_allow_remote, "--ingest.allow-remote"),
            (
                self.kubernetes_attribution.is_some(),
                "--kubernetes.attribution",
            ),
        ]
        .into_iter()
        .filter_map(|(given, flag)| given.then_some(flag))
        .collect()
    }
}

/// Every flag's value, whichever level of the command line gave it: what the configuration is
/// built from.
#[derive(Debug, Default, Clone)]
pub struct CommonArgs {
    pub global: GlobalArgs,
    pub serve: ServeArgs,
}

fn merge<T: Clone>(into: &mut Option<T>, from: &Option<T>) {
    if from.is_some() {
        *into = from.clone();
    }
}

impl SourceArgs {
    fn merge_into(&self, to: &mut SourceArgs) {
        merge(&mut to.source, &self.source);
        self.pace.merge_into(&mut to.pace);
        merge(&mut to.sim_scenarios, &self.sim_scenarios);
    }
}

impl PaceArgs {
    fn merge_into(&self, to: &mut PaceArgs) {
        merge(&mut to.sample_interval, &self.sample_interval);
        merge(&mut to.replay_report_interval, &self.replay_report_interval);
    }
}

impl LiveArgs {
    fn merge_into(&self, to: &mut LiveArgs) {
        self.source.merge_into(&mut to.source);
        merge(&mut to.replay_speed, &self.replay_speed);
    }
}

impl Cli {
    /// The flags of the top level and of the command together; the command's win. Source flags
    /// before a command name are still read (`gpumem-exporter --source sim oom`); flags only
    /// `serve` reads are refused before another command rather than ignored.
    pub fn common(&self) -> Result<CommonArgs, ConfigError> {
        let mut c = CommonArgs {
            global: self.global.clone(),
            serve: self.serve.clone(),
        };
        let live = &mut c.serve.live;
        let (name, own_source): (&str, Option<&SourceArgs>) = match &self.command {
            None => return Ok(c),
            Some(Command::Serve(a)) => {
                let top = std::mem::take(&mut c.serve);
                c.serve = a.clone();
                let mut merged = top.live;
                a.live.merge_into(&mut merged);
                c.serve.live = merged;
                for (field, flag) in [
                    (&mut c.serve.listen_address, &top.listen_address),
                    (&mut c.serve.telemetry_path, &top.telemetry_path),
                    (&mut c.serve.ingest_socket_mode, &top.ingest_socket_mode),
                    (
                        &mut c.serve.ingest_listen_address,
                        &top.ingest_listen_address,
                    ),
                    (
                        &mut c.serve.kubernetes_attribution,
                        &top.kubernetes_attribution,
                    ),
                ] {
                    if field.is_none() {
                        *field = flag.clone();
                    }
                }
                if c.serve.web_config_file.is_none() {
                    c.serve.web_config_file = top.web_config_file;
                }
                if c.serve.ingest_socket.is_none() {
                    c.serve.ingest_socket = top.ingest_socket;
                }
                c.serve.ingest_allow_remote |= top.ingest_allow_remote;
                return Ok(c);
            }
            Some(Command::Top(a)) => {
                a.live.merge_into(live);
                ("top", None)
            }
            Some(Command::Replay(a)) => {
                a.pace.merge_into(&mut live.source.pace);
                ("replay", None)
            }
            Some(Command::Profile(a)) => ("profile", Some(&a.source)),
            Some(Command::Oom(a)) => ("oom", Some(&a.source)),
            Some(Command::Leak(a)) => ("leak", Some(&a.source)),
            Some(Command::Fragment(a)) => ("fragment", Some(&a.source)),
            Some(Command::Compare(_)) => ("compare", None),
            Some(Command::Sweep(_)) => ("sweep", None),
        };
        if let Some(s) = own_source {
            s.merge_into(&mut live.source);
        }
        if let Some(flag) = self.serve.serve_only_flags().first() {
            return Err(ConfigError {
                field: flag.to_string(),
                message: format!("is a flag of `serve`; `{name}` does not read it"),
            });
        }
        Ok(c)
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve /metrics (the default when no command is given).
    Serve(ServeArgs),
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
    pub source: SourceArgs,
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
    pub source: SourceArgs,
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
    pub source: SourceArgs,
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
    pub source: SourceArgs,
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
    pub live: LiveArgs,
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
    #[command(flatten)]
    pub pace: PaceArgs,
}

/// Any path, the empty one included (it turns the socket off).
fn parse_path(s: &str) -> Result<PathBuf, String> {
    Ok(PathBuf::from(s))
}

/// `key=value`, the key non-empty.
fn parse_tag(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
        _ => Err(format!("`{s}` is not KEY=VALUE")),
    }
}

/// How a flag's value goes into the configuration.
type Apply<'a> = Box<dyn Fn(&mut Config) -> Result<(), ConfigError> + 'a>;

/// One flag given on the command line: the configuration key it sets, and how.
struct Override<'a> {
    flag: &'static str,
    field: &'static str,
    apply: Apply<'a>,
}

impl<'a> Override<'a> {
    fn new(
        flag: &'static str,
        field: &'static str,
        apply: impl Fn(&mut Config) -> Result<(), ConfigError> + 'a,
    ) -> Self {
        Override {
            flag,
            field,
            apply: Box::new(apply),
        }
    }

    /// A flag whose value cannot be wrong once clap has read it.
    fn set(flag: &'static str, field: &'static str, apply: impl Fn(&mut Config) + 'a) -> Self {
        Self::new(flag, field, move |c| {
            apply(c);
            Ok(())
        })
    }
}

impl CommonArgs {
    /// Defaults, then the file, then the flags; validated.
    pub fn effective_config(&self) -> Result<Config, ConfigError> {
        let mut c = match &self.global.config {
            Some(p) => Config::from_file(p)?,
            None => Config::default(),
        };
        for o in self.overrides() {
            (o.apply)(&mut c).map_err(|e| self.name_flag(e))?;
        }
        c.validate().map_err(|e| self.name_flag(e))?;
        Ok(c)
    }

    /// Name the flag where a bad value came from one.
    pub fn name_flag(&self, mut e: ConfigError) -> ConfigError {
        if let Some(o) = self.overrides().iter().find(|o| o.field == e.field) {
            e.field = o.flag.to_string();
        }
        e
    }

    /// Every flag given, with the configuration key it sets and how: the one place where a
    /// flag meets its key (clap declares the flag, serde the key).
    fn overrides(&self) -> Vec<Override<'_>> {
        let (g, serve) = (&self.global, &self.serve);
        let (live, src) = (&serve.live, &serve.live.source);
        let mut o = Vec::new();
        if let Some(v) = &src.source {
            o.push(Override::new("--source", "source", move |c| {
                c.source = SourceSpec::parse(v)?;
                Ok(())
            }));
        }
        if let Some(v) = src.pace.sample_interval {
            o.push(Override::set(
                "--sample-interval",
                "sample_interval",
                move |c| c.sample_interval = v,
            ));
        }
        if let Some(v) = &g.log_level {
            o.push(Override::set("--log.level", "log_level", move |c| {
                c.log_level = v.clone()
            }));
        }
        if let Some(v) = &g.log_format {
            o.push(Override::set("--log.format", "log_format", move |c| {
                c.log_format = v.clone()
            }));
        }
        if let Some(v) = &serve.listen_address {
            o.push(Override::set(
                "--web.listen-address",
                "web.listen_address",
                move |c| c.web.listen_address = v.clone(),
            ));
        }
        if let Some(v) = &serve.telemetry_path {
            o.push(Override::set(
                "--web.telemetry-path",
                "web.telemetry_path",
                move |c| c.web.telemetry_path = v.clone(),
            ));
        }
        if let Some(v) = &serve.web_config_file {
            o.push(Override::set(
                "--web.config.file",
                "web.config_file",
                move |c| c.web.config_file = Some(v.clone()),
            ));
        }
        if let Some(v) = &serve.ingest_socket {
            o.push(Override::set(
                "--ingest.socket",
                "ingest.socket",
                move |c| c.ingest.socket = v.clone(),
            ));
        }
        if let Some(v) = &serve.ingest_socket_mode {
            o.push(Override::set(
                "--ingest.socket-mode",
                "ingest.socket_mode",
                move |c| c.ingest.socket_mode = v.clone(),
            ));
        }
        if let Some(v) = &serve.ingest_listen_address {
            o.push(Override::set(
                "--ingest.listen-address",
                "ingest.listen_address",
                move |c| c.ingest.listen_address = v.clone(),
            ));
        }
        if serve.ingest_allow_remote {
            o.push(Override::set(
                "--ingest.allow-remote",
                "ingest.allow_remote",
                |c| c.ingest.allow_remote = true,
            ));
        }
        if let Some(v) = &serve.kubernetes_attribution {
            o.push(Override::set(
                "--kubernetes.attribution",
                "kubernetes.attribution",
                move |c| {
                    c.kubernetes.attribution = match v.as_str() {
                        "on" => crate::config::Attribution::On,
                        "off" => crate::config::Attribution::Off,
                        _ => crate::config::Attribution::Auto,
                    }
                },
            ));
        }
        if let Some(v) = live.replay_speed {
            o.push(Override::set("--replay.speed", "replay.speed", move |c| {
                c.replay.speed = v
            }));
        }
        if let Some(v) = src.pace.replay_report_interval {
            o.push(Override::set(
                "--replay.report-interval",
                "replay.report_interval",
                move |c| c.replay.report_interval = v,
            ));
        }
        if let Some(list) = &src.sim_scenarios {
            o.push(Override::new("--sim.scenarios", "sim.gpus", move |c| {
                let mut gpus = Vec::new();
                for name in list {
                    let scenario = serde_yaml_ng::from_str(name).map_err(|_| ConfigError {
                        field: "sim.gpus".into(),
                        message: format!(
                            "`{name}` is not a scenario; accepted: steady, leak, oom, frag, shared, processes, churn, idle, mig"
                        ),
                    })?;
                    gpus.push(SimGpuConfig::new(scenario));
                }
                c.sim.gpus = gpus;
                Ok(())
            }));
        }
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let e = config(&["--sample-interval", "5ms"]).unwrap_err();
        assert_eq!(e.field, "--sample-interval");
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
