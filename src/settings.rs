//! Every setting a flag can give, declared once: its flag, its configuration key, what value it
//! takes, its help, the default shown (read from `Config::default()`, never written twice), and
//! which commands read it. The command line, each command's help, the flags' override of the
//! configuration file, the naming of a flag in an error, and the refusal of a flag a command does
//! not read all come from `SETTINGS`; a test holds the README's flag table to it.
//!
//! Adding a flag: a `Setting` here, and its key in `config` (field, default, validation).

use std::time::Duration;

use clap::{Arg, ArgAction, ArgMatches, Command};

use crate::config::{Attribution, Config, ConfigError, SimGpuConfig, SourceSpec};

/// Which commands read a setting: each command reads a union of these.
pub mod scope {
    /// Every command (logging).
    pub const GLOBAL: u8 = 1;
    /// Every command that samples or replays at a pace: `replay` and all below.
    pub const PACE: u8 = 2;
    /// The commands that sample a source: `profile`, `oom`, `leak`, `fragment` and all below.
    pub const SOURCE: u8 = 4;
    /// A source followed as it happens: `top` and `serve`.
    pub const LIVE: u8 = 8;
    /// `serve` alone (the exporter without a command).
    pub const SERVE: u8 = 16;
}
use scope::{GLOBAL, LIVE, PACE, SERVE, SOURCE};

/// What a flag's value is, as the command line checks it before anything runs.
#[derive(Debug, Clone, Copy)]
pub enum Value {
    /// Given or not, no value.
    Switch,
    Text,
    /// A duration: 1s, 250ms, 2m.
    Duration,
    /// A sampling interval: a duration within 10ms..60s.
    Interval,
    /// A number.
    Number,
    /// One of these.
    Choice(&'static [&'static str]),
}

pub struct Setting {
    /// The flag, without its dashes: `web.listen-address`.
    pub flag: &'static str,
    /// The configuration key it sets (YAML path): `web.listen_address`.
    pub key: &'static str,
    pub value_name: &'static str,
    pub value: Value,
    /// One line, without a final full stop; the default follows it.
    pub help: &'static str,
    pub scope: u8,
    /// The default as the help shows it, `None` where there is none worth showing.
    pub shown: fn(&Config) -> Option<String>,
    /// Put a checked value into the configuration; an error says what is accepted.
    pub apply: fn(&mut Config, &str) -> Result<(), String>,
}

fn duration(v: &str) -> Duration {
    crate::units::parse_duration(v).expect("checked by the command line")
}

fn show_duration(d: Duration) -> Option<String> {
    Some(humantime::format_duration(d).to_string())
}

/// The simulator's scenarios, for the help and for the error that names them.
macro_rules! scenarios {
    () => {
        "steady, leak, oom, frag, shared, processes, churn, idle, mig"
    };
}

/// In the order the help lists them.
pub static SETTINGS: &[Setting] = &[
    Setting {
        flag: "log.level",
        key: "log_level",
        value_name: "LEVEL",
        value: Value::Text,
        help: "Log level: error, warn, info, debug, trace",
        scope: GLOBAL,
        shown: |c| Some(c.log_level.clone()),
        apply: |c, v| {
            c.log_level = v.into();
            Ok(())
        },
    },
    Setting {
        flag: "log.format",
        key: "log_format",
        value_name: "FORMAT",
        value: Value::Text,
        help: "Log format: logfmt or json",
        scope: GLOBAL,
        shown: |c| Some(c.log_format.clone()),
        apply: |c, v| {
            c.log_format = v.into();
            Ok(())
        },
    },
    Setting {
        flag: "source",
        key: "source",
        value_name: "SOURCE",
        value: Value::Text,
        help: "Where to sample: nvml, sim, or replay:<file>[,<file>...]",
        scope: SOURCE,
        shown: |c| Some(c.source.to_string()),
        apply: |c, v| {
            c.source = SourceSpec::parse(v).map_err(|e| e.message)?;
            Ok(())
        },
    },
    Setting {
        flag: "sample-interval",
        key: "sample_interval",
        value_name: "DURATION",
        value: Value::Interval,
        help: "Time between samples, 10ms..60s",
        scope: PACE,
        shown: |c| show_duration(c.sample_interval),
        apply: |c, v| {
            c.sample_interval = duration(v);
            Ok(())
        },
    },
    Setting {
        flag: "replay.report-interval",
        key: "replay.report_interval",
        value_name: "DURATION",
        value: Value::Duration,
        help: "Seconds between a replayed process's allocator reports (the client's rate; 0 sends every recorded sample)",
        scope: PACE,
        shown: |c| show_duration(c.replay.report_interval),
        apply: |c, v| {
            c.replay.report_interval = duration(v);
            Ok(())
        },
    },
    Setting {
        flag: "replay.sort",
        key: "replay.sort",
        value_name: "",
        value: Value::Switch,
        help: "Sort a trace whose lines are out of time order and drop its repeated lines, with a warning that counts them, instead of refusing it",
        scope: PACE,
        shown: |_| None,
        apply: |c, _| {
            c.replay.sort = true;
            Ok(())
        },
    },
    Setting {
        flag: "sim.scenarios",
        key: "sim.gpus",
        value_name: "LIST",
        value: Value::Text,
        help: concat!("Simulator scenarios, one GPU each: ", scenarios!()),
        scope: SOURCE,
        shown: |c| {
            let names: Vec<String> = c
                .sim
                .gpus
                .iter()
                .filter_map(|g| serde_json::to_value(g.scenario).ok())
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect();
            Some(names.join(","))
        },
        apply: |c, v| {
            let mut gpus = Vec::new();
            for name in v.split(',') {
                let scenario = serde_yaml_ng::from_str(name).map_err(|_| {
                    format!("`{name}` is not a scenario; accepted: {}", scenarios!())
                })?;
                gpus.push(SimGpuConfig::new(scenario));
            }
            c.sim.gpus = gpus;
            Ok(())
        },
    },
    Setting {
        flag: "replay.speed",
        key: "replay.speed",
        value_name: "FACTOR",
        value: Value::Number,
        help: "Replay speed: 1 is real time, 10 ten times faster",
        scope: LIVE,
        shown: |c| Some(c.replay.speed.to_string()),
        apply: |c, v| {
            c.replay.speed = v.parse().map_err(|_| format!("`{v}` is not a number"))?;
            Ok(())
        },
    },
    Setting {
        flag: "web.listen-address",
        key: "web.listen_address",
        value_name: "ADDR",
        value: Value::Text,
        help: "Address to serve metrics on",
        scope: SERVE,
        shown: |c| Some(c.web.listen_address.clone()),
        apply: |c, v| {
            c.web.listen_address = v.into();
            Ok(())
        },
    },
    Setting {
        flag: "web.telemetry-path",
        key: "web.telemetry_path",
        value_name: "PATH",
        value: Value::Text,
        help: "Path under which to expose metrics",
        scope: SERVE,
        shown: |c| Some(c.web.telemetry_path.clone()),
        apply: |c, v| {
            c.web.telemetry_path = v.into();
            Ok(())
        },
    },
    Setting {
        flag: "web.config.file",
        key: "web.config_file",
        value_name: "FILE",
        value: Value::Text,
        help: "Web config file (exporter-toolkit format) for TLS and basic auth on the web endpoints",
        scope: SERVE,
        shown: |_| None,
        apply: |c, v| {
            c.web.config_file = Some(v.into());
            Ok(())
        },
    },
    Setting {
        flag: "ingest.socket",
        key: "ingest.socket",
        value_name: "PATH",
        value: Value::Text,
        help: "Unix socket for allocator reports; empty turns it off",
        scope: SERVE,
        shown: |c| Some(c.ingest.socket.display().to_string()),
        apply: |c, v| {
            c.ingest.socket = v.into();
            Ok(())
        },
    },
    Setting {
        flag: "ingest.socket-mode",
        key: "ingest.socket_mode",
        value_name: "MODE",
        value: Value::Text,
        help: "Permission bits of the ingest socket, in octal",
        scope: SERVE,
        shown: |c| Some(c.ingest.socket_mode.clone()),
        apply: |c, v| {
            c.ingest.socket_mode = v.into();
            Ok(())
        },
    },
    Setting {
        flag: "ingest.listen-address",
        key: "ingest.listen_address",
        value_name: "ADDR",
        value: Value::Text,
        help: "Plain-HTTP ingest on this TCP address (loopback only unless --ingest.allow-remote)",
        scope: SERVE,
        shown: |c| Some(c.ingest.tcp_address().unwrap_or("off").into()),
        apply: |c, v| {
            c.ingest.listen_address = v.into();
            Ok(())
        },
    },
    Setting {
        flag: "ingest.allow-remote",
        key: "ingest.allow_remote",
        value_name: "",
        value: Value::Switch,
        help: "Allow TCP ingest on a non-loopback address (reports over TCP are not authenticated)",
        scope: SERVE,
        shown: |_| None,
        apply: |c, _| {
            c.ingest.allow_remote = true;
            Ok(())
        },
    },
    Setting {
        flag: "kubernetes.attribution",
        key: "kubernetes.attribution",
        value_name: "MODE",
        value: Value::Choice(&["auto", "on", "off"]),
        help: "Pod labels on per-process series: auto (on inside a pod), on, off",
        scope: SERVE,
        shown: |c| {
            Some(
                match c.kubernetes.attribution {
                    Attribution::Auto => "auto",
                    Attribution::On => "on",
                    Attribution::Off => "off",
                }
                .into(),
            )
        },
        apply: |c, v| {
            c.kubernetes.attribution = match v {
                "on" => Attribution::On,
                "off" => Attribution::Off,
                _ => Attribution::Auto,
            };
            Ok(())
        },
    },
];

impl Setting {
    /// The flag as a user types it.
    pub fn long(&self) -> String {
        format!("--{}", self.flag)
    }

    /// The default the help shows.
    pub fn default_shown(&self) -> Option<String> {
        (self.shown)(&Config::default())
    }

    fn arg(&'static self) -> Arg {
        let help = match self.default_shown() {
            Some(d) => format!("{}. [default: {d}]", self.help),
            None => self.help.to_string(),
        };
        let arg = Arg::new(self.flag)
            .long(self.flag)
            .help(help)
            .global(self.scope == GLOBAL);
        match self.value {
            Value::Switch => arg.action(ArgAction::SetTrue),
            Value::Text => arg.value_name(self.value_name),
            // A value may start with `-` (`--sample-interval -1s`): refused for what it is,
            // not taken for an unknown flag.
            Value::Duration => arg
                .value_name(self.value_name)
                .allow_hyphen_values(true)
                .value_parser(|s: &str| crate::units::parse_duration(s).map(|_| s.to_string())),
            Value::Interval => arg
                .value_name(self.value_name)
                .allow_hyphen_values(true)
                .value_parser(|s: &str| crate::units::parse_interval(s).map(|_| s.to_string())),
            Value::Number => arg
                .value_name(self.value_name)
                .allow_hyphen_values(true)
                .value_parser(|s: &str| {
                    s.parse::<f64>()
                        .map(|_| s.to_string())
                        .map_err(|e| e.to_string())
                }),
            Value::Choice(choices) => arg
                .value_name(self.value_name)
                .value_parser(clap::builder::PossibleValuesParser::new(choices)),
        }
    }
}

/// The settings a command reads (`READS`, a union of `scope`s) as its flags; once parsed, the
/// ones given with their values.
#[derive(Debug, Clone, Default)]
pub struct Flags<const READS: u8> {
    given: Vec<Given>,
}

/// A flag given on the command line.
#[derive(Clone)]
pub struct Given {
    pub setting: &'static Setting,
    pub value: String,
}

impl std::fmt::Debug for Given {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}={:?}", self.setting.long(), self.value)
    }
}

pub type GlobalFlags = Flags<GLOBAL>;
/// `replay`.
pub type PaceFlags = Flags<PACE>;
/// `profile`, `oom`, `leak`, `fragment`.
pub type SourceFlags = Flags<{ PACE | SOURCE }>;
/// `top`.
pub type LiveFlags = Flags<{ PACE | SOURCE | LIVE }>;
/// `serve`.
pub type ServeFlags = Flags<{ PACE | SOURCE | LIVE | SERVE }>;

/// Who reads a scope, in words.
fn readers(scope: u8) -> &'static str {
    match scope {
        GLOBAL => "every command",
        PACE => "`replay` and the commands that sample",
        SOURCE => "the commands that sample a source",
        LIVE => "`serve` and `top`",
        _ => "`serve`",
    }
}

fn read_by(reads: u8) -> impl Iterator<Item = &'static Setting> {
    SETTINGS.iter().filter(move |s| s.scope & reads != 0)
}

impl<const READS: u8> Flags<READS> {
    /// The scopes the command reads.
    pub const READS: u8 = READS;

    pub fn given(&self) -> &[Given] {
        &self.given
    }
}

impl<const READS: u8> clap::FromArgMatches for Flags<READS> {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        let given = read_by(READS)
            .filter_map(|s| {
                let value = match s.value {
                    Value::Switch => m.get_flag(s.flag).then(|| "true".to_string()),
                    _ => m.get_one::<String>(s.flag).cloned(),
                };
                value.map(|value| Given { setting: s, value })
            })
            .collect();
        Ok(Flags { given })
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

impl<const READS: u8> clap::Args for Flags<READS> {
    fn augment_args(cmd: Command) -> Command {
        read_by(READS).fold(cmd, |cmd, s| cmd.arg(s.arg()))
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

/// The flags given for one run, from every level of the command line, the command's last (they
/// win).
#[derive(Debug, Default, Clone)]
pub struct Overrides(Vec<Given>);

impl Overrides {
    /// `levels` in the order they were given (top level first). A flag the command does not
    /// read is refused, not ignored: `reads` is the command's union of scopes.
    pub fn gather(levels: &[&[Given]], command: &str, reads: u8) -> Result<Self, ConfigError> {
        let mut all: Vec<Given> = Vec::new();
        for g in levels.iter().flat_map(|l| l.iter()) {
            if g.setting.scope & reads == 0 {
                return Err(ConfigError {
                    field: g.setting.long(),
                    message: format!(
                        "is a flag of {}; `{command}` does not read it",
                        readers(g.setting.scope)
                    ),
                });
            }
            all.retain(|o| o.setting.flag != g.setting.flag);
            all.push(g.clone());
        }
        Ok(Overrides(all))
    }

    /// Put every flag into `c`, naming the flag where a value is refused.
    pub fn apply(&self, c: &mut Config) -> Result<(), ConfigError> {
        for g in &self.0 {
            (g.setting.apply)(c, &g.value).map_err(|message| ConfigError {
                field: g.setting.long(),
                message,
            })?;
        }
        Ok(())
    }

    /// Name the flag where a bad value came from one (an error about a configuration key).
    pub fn name_flag(&self, mut e: ConfigError) -> ConfigError {
        if let Some(g) = self.0.iter().find(|g| g.setting.key == e.field) {
            e.field = g.setting.long();
        }
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_setting_is_declared_once_and_applies_its_shown_default() {
        for (i, s) in SETTINGS.iter().enumerate() {
            assert!(
                SETTINGS[..i]
                    .iter()
                    .all(|o| o.flag != s.flag && o.key != s.key),
                "{} twice",
                s.flag
            );
            assert!(!s.help.ends_with('.'), "{}: the default follows", s.flag);
            // The default shown is one the setting accepts, and gives the default back.
            if let Some(shown) = s.default_shown() {
                let mut c = Config::default();
                (s.apply)(&mut c, &shown).unwrap_or_else(|e| panic!("{}: {e}", s.flag));
                assert_eq!(c.to_yaml(), Config::default().to_yaml(), "{}", s.flag);
            }
        }
    }

    #[test]
    fn the_command_s_own_flag_wins_and_a_flag_it_does_not_read_is_refused() {
        let find = |f: &str| SETTINGS.iter().find(|s| s.flag == f).unwrap();
        let given = |f: &str, v: &str| Given {
            setting: find(f),
            value: v.into(),
        };
        let top = [given("sample-interval", "3s"), given("source", "sim")];
        let own = [given("sample-interval", "2s")];
        let o = Overrides::gather(&[&top, &own], "oom", PACE | SOURCE).unwrap();
        let mut c = Config::default();
        o.apply(&mut c).unwrap();
        assert_eq!(c.sample_interval, Duration::from_secs(2));
        assert_eq!(c.source, SourceSpec::Sim);

        let e = Overrides::gather(&[&top], "replay", PACE).unwrap_err();
        assert_eq!(e.field, "--source");
        assert!(e.message.contains("`replay`"), "{e}");
    }
}
