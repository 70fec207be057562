//! The `source` key and `--source`: which source to sample, written as one string.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::{err, ConfigError};

/// Which source to sample: the `source` key and `--source`, written as a string.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum SourceSpec {
    Nvml,
    Sim,
    Replay(Vec<PathBuf>),
}

pub const SOURCE_ACCEPTED: &str = "accepted: nvml, sim, replay:<file>[,<file>...]";

impl SourceSpec {
    pub fn parse(s: &str) -> Result<SourceSpec, ConfigError> {
        match s {
            "nvml" => Ok(SourceSpec::Nvml),
            "sim" => Ok(SourceSpec::Sim),
            _ => match s.strip_prefix("replay:") {
                Some(files) => {
                    let files: Vec<PathBuf> = files
                        .split(',')
                        .filter(|f| !f.is_empty())
                        .map(PathBuf::from)
                        .collect();
                    if files.is_empty() {
                        Err(err(
                            "source",
                            format!("`{s}` names no file; {SOURCE_ACCEPTED}"),
                        ))
                    } else {
                        Ok(SourceSpec::Replay(files))
                    }
                }
                None => Err(err(
                    "source",
                    format!("`{s}` is not a source; {SOURCE_ACCEPTED}"),
                )),
            },
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            SourceSpec::Nvml => "nvml",
            SourceSpec::Sim => "sim",
            SourceSpec::Replay(_) => "replay",
        }
    }
}

impl TryFrom<String> for SourceSpec {
    type Error = String;

    fn try_from(s: String) -> Result<Self, String> {
        SourceSpec::parse(&s).map_err(|e| e.message)
    }
}

impl From<SourceSpec> for String {
    fn from(s: SourceSpec) -> String {
        s.to_string()
    }
}

impl std::fmt::Display for SourceSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SourceSpec::Replay(files) => {
                let files: Vec<String> = files.iter().map(|p| p.display().to_string()).collect();
                write!(f, "replay:{}", files.join(","))
            }
            other => f.write_str(other.kind()),
        }
    }
}
