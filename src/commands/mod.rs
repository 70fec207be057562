//! The faces: each command parses its arguments, asks the runtime (`crate::runtime`) for
//! samples or reports, and renders what it gets. `serve` is the exporter itself.

use std::ops::ControlFlow;
use std::process::ExitCode;

use crate::cli::Command;
use crate::config::Config;
use crate::runtime::stepped::Usage;

pub mod chart;
pub mod compare;
pub mod fragment;
pub mod leak;
pub mod oom;
pub mod profile;
pub mod replay;
pub mod schema;
pub mod serve;
pub mod sweep;
#[cfg(feature = "tui")]
pub mod top;
pub mod workflow;

/// Run a report command unless `command` is some other one, which is handed back.
pub fn dispatch(cfg: &Config, command: Option<Command>) -> ControlFlow<ExitCode, Option<Command>> {
    let result = match command {
        Some(Command::Profile(a)) => profile::run(cfg, a),
        Some(Command::Oom(a)) => oom::run(cfg, a),
        Some(Command::Leak(a)) => leak::run(cfg, a),
        Some(Command::Fragment(a)) => fragment::run(cfg, a),
        Some(Command::Compare(a)) => compare::run(a),
        Some(Command::Sweep(a)) => sweep::run(a),
        #[cfg(feature = "tui")]
        Some(Command::Top(a)) => top::run(cfg, a),
        #[cfg(not(feature = "tui"))]
        Some(Command::Top(_)) => Err(crate::runtime::stepped::usage(
            "top",
            "this build has no terminal UI (it was built without the `tui` feature)",
        )),
        other => return ControlFlow::Continue(other),
    };
    ControlFlow::Break(match result {
        Ok(code) => code,
        Err(e) => failed(&e),
    })
}

/// A command whose standard output is closed (`gpumem-exporter compare a b | head -1`) ends
/// there, quietly, as Unix tools do: SIGPIPE goes back to its default action. Rust ignores it,
/// which turns every later print into a panic. Not for `serve`, where a client that hangs up
/// must cost a failed write, never the exporter.
pub fn end_quietly_on_a_closed_stdout() {
    // SAFETY: setting a signal's disposition to its default, before any thread is started.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
}

/// Say what went wrong; the exit status is 2 for a usage error (a flag the run cannot take),
/// 1 for anything else.
pub fn failed(e: &anyhow::Error) -> ExitCode {
    eprintln!("gpumem-exporter: {e:#}");
    if e.downcast_ref::<Usage>().is_some() {
        ExitCode::from(2)
    } else {
        ExitCode::FAILURE
    }
}
