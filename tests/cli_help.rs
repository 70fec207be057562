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

fn readme() -> String {
    std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap()
}

/// The README's first command, as a user without root runs it: allocator reports are on.
#[test]
fn the_readmes_quick_start_takes_reports_as_a_user_without_root() {
    use std::os::unix::process::CommandExt;
    let readme = readme();
    let line = readme
        .lines()
        .find(|l| l.starts_with("cargo run --release -- "))
        .expect("the quick start's command");
    let command = line.split('#').next().unwrap();
    let mut args: Vec<String> = command
        .split_whitespace()
        .skip(4)
        .map(str::to_string)
        .collect();
    let at = args
        .iter()
        .position(|a| a == "--ingest.socket")
        .expect("the quick start names a socket a user can create");
    let socket = PathBuf::from(&args[at + 1]);
    let dir = socket.parent().unwrap();
    assert!(
        !socket.starts_with("/run"),
        "{}: only root may create it",
        socket.display()
    );
    // The same folder, a fresh name: nothing else running from the quick start is disturbed.
    let mine = dir.join(format!("gpumem-readme-{}.sock", std::process::id()));
    args[at + 1] = mine.display().to_string();
    let log = tempfile::NamedTempFile::new().unwrap();
    let root = unsafe { libc::geteuid() } == 0;
    // As `nobody` the build folder may be out of reach (a checkout in a private folder), so the
    // binary runs from a copy in a folder anyone may enter.
    let reachable = tempfile::tempdir().unwrap();
    let bin = if root {
        use std::os::unix::fs::PermissionsExt;
        let bin = reachable.path().join("gpumem-exporter");
        std::fs::copy(BIN, &bin).unwrap();
        for p in [reachable.path(), bin.as_path()] {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        bin
    } else {
        PathBuf::from(BIN)
    };
    let mut c = Command::new(&bin);
    c.args(&args)
        .args(["--web.listen-address", "127.0.0.1:0"])
        .stdout(std::process::Stdio::null())
        .stderr(log.reopen().unwrap());
    // Run as `nobody` where the test runs as root.
    if root {
        c.uid(65534).gid(65534);
    }
    // The copy was just written: a test thread that forked meanwhile holds it open for
    // writing until its own exec, and exec of a file open for writing fails (ETXTBSY).
    let mut tries = 0;
    let mut child = loop {
        match c.spawn() {
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) && tries < 50 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            r => break r.unwrap(),
        }
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let text = loop {
        let text = std::fs::read_to_string(log.path()).unwrap();
        if text.contains("serving metrics") || child.try_wait().unwrap().is_some() {
            break text;
        }
        if std::time::Instant::now() > deadline {
            break text;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_file(&mine);
    assert!(
        text.contains("ingest listening") && !text.contains("allocator reports are OFF"),
        "{text}"
    );
}

/// The README says when the forecast series appear, in the configuration's own defaults.
#[test]
fn the_readme_says_when_the_forecast_series_appear() {
    let a = gpumem_exporter::config::Config::default().analysis;
    let s = |d: std::time::Duration| format!("{} s", d.as_secs());
    let readme = readme();
    for want in [
        format!(
            "`analysis.warmup` + `analysis.leak_min_span` ({} + {})",
            s(a.warmup),
            s(a.leak_min_span)
        ),
        format!("`analysis.eta_min_span` ({})", s(a.eta_min_span)),
        format!("`analysis.eta_warmup` ({})", s(a.eta_warmup)),
    ] {
        let flat = readme.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(flat.contains(&want), "README.md should say {want}");
    }
}
