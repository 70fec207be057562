//! Each command's `--help`, as a user sees it, against the text kept in tests/cli_help/.
//! A change to a flag changes that text: review the difference, then write the new text with
//! `GPUMEM_BLESS=1 cargo test --test cli_help`.

use std::path::PathBuf;
use std::process::Command;

use gpumem_exporter::settings::{scope, SETTINGS};

const BIN: &str = env!("CARGO_BIN_EXE_gpumem-exporter");
const COMMANDS: [&str; 10] = [
    "", "serve", "replay", "profile", "oom", "leak", "fragment", "compare", "sweep", "top",
];

fn help(command: &str) -> String {
    let mut c = Command::new(BIN);
    if !command.is_empty() {
        c.arg(command);
    }
    let out = c.arg("--help").env("NO_COLOR", "1").output().unwrap();
    assert!(out.status.success(), "{command} --help failed");
    String::from_utf8(out.stdout).unwrap()
}

fn snapshot(command: &str) -> PathBuf {
    let name = if command.is_empty() {
        "gpumem-exporter"
    } else {
        command
    };
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/cli_help")
        .join(format!("{name}.txt"))
}

/// The flags a help text lists.
fn flags(text: &str) -> Vec<String> {
    text.split_whitespace()
        .filter(|w| w.starts_with("--"))
        .map(|w| w.trim_end_matches([',', '.']).to_string())
        .collect()
}

#[test]
fn every_commands_help_matches_its_snapshot() {
    let bless = std::env::var_os("GPUMEM_BLESS").is_some();
    let mut stale = Vec::new();
    for command in COMMANDS {
        let text = help(command);
        let path = snapshot(command);
        if bless {
            std::fs::write(&path, &text).unwrap();
            continue;
        }
        let kept = std::fs::read_to_string(&path)
            .unwrap_or_else(|_| panic!("{} is missing: run with GPUMEM_BLESS=1", path.display()));
        if kept != text {
            stale.push(format!("{}:\n{text}", path.display()));
        }
    }
    assert!(
        stale.is_empty(),
        "help changed (GPUMEM_BLESS=1 to accept):\n{}",
        stale.join("\n")
    );
}

#[test]
fn each_command_lists_only_the_flags_it_reads() {
    let serve_only: Vec<String> = SETTINGS
        .iter()
        .filter(|s| s.scope == scope::SERVE)
        .map(|s| s.long())
        .collect();
    assert!(serve_only.contains(&"--web.listen-address".to_string()));
    for command in ["", "serve"] {
        let f = flags(&help(command));
        for flag in &serve_only {
            assert!(
                f.contains(&flag.to_string()),
                "`{command} --help` lacks {flag}"
            );
        }
    }
    for command in [
        "replay", "profile", "oom", "leak", "fragment", "compare", "sweep", "top",
    ] {
        let f = flags(&help(command));
        for flag in &serve_only {
            assert!(
                !f.contains(&flag.to_string()),
                "`{command} --help` lists {flag}"
            );
        }
        assert!(
            f.contains(&"--log.format".to_string()),
            "{command}: global flags"
        );
    }
    for command in ["replay", "compare", "sweep"] {
        let f = flags(&help(command));
        assert!(
            !f.contains(&"--source".to_string()),
            "`{command}` reads no source"
        );
        assert!(!f.contains(&"--replay.speed".to_string()));
    }
    for command in ["profile", "oom", "leak", "fragment"] {
        let f = flags(&help(command));
        assert!(f.contains(&"--source".to_string()) && !f.contains(&"--replay.speed".to_string()));
    }
    assert!(flags(&help("top")).contains(&"--replay.speed".to_string()));
}

/// The README's flag table: every setting's flag, with the default the help shows.
#[test]
fn the_readme_lists_every_flag_with_its_default() {
    let readme =
        std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("README.md"))
            .unwrap();
    for s in SETTINGS {
        let start = format!("| `{}` |", s.long());
        let row = readme
            .lines()
            .find(|l| l.starts_with(&start))
            .unwrap_or_else(|| panic!("README.md's flag table lacks {}", s.long()));
        let default = row.split('|').nth(2).unwrap().trim().trim_matches('`');
        if let Some(shown) = s.default_shown() {
            assert_eq!(default, shown, "README.md: the default of {}", s.long());
        }
    }
}
