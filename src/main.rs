//! The binary: read the command line into a configuration and hand it to the face the command
//! names (`serve` when none).

use std::process::ExitCode;

use clap::Parser;
use gpumem_exporter::cli::{Cli, Command};
use gpumem_exporter::commands;
use gpumem_exporter::exporter::webconfig;

fn main() -> ExitCode {
    gpumem_exporter::runtime::heap::one_arena();
    let cli = Cli::parse();
    let cfg = cli.common().and_then(|args| {
        let c = args.effective_config()?;
        webconfig::check(&c).map_err(|e| args.name_flag(e))?;
        Ok(c)
    });
    let cfg = match cfg {
        Ok(c) => c,
        Err(e) => {
            eprintln!("gpumem-exporter: {e}");
            return ExitCode::from(2);
        }
    };
    if cli.global.print_config || !matches!(cli.command, None | Some(Command::Serve(_))) {
        commands::end_quietly_on_a_closed_stdout();
    }
    if cli.global.print_config {
        print!("{}", cfg.to_yaml());
        return ExitCode::SUCCESS;
    }
    // The report commands set up logging themselves (`top` keeps it off the screen).
    let command = match commands::dispatch(&cfg, cli.command) {
        std::ops::ControlFlow::Break(code) => return code,
        std::ops::ControlFlow::Continue(other) => other,
    };
    gpumem_exporter::logging::init(&cfg);
    let result = match command {
        None | Some(Command::Serve(_)) => commands::serve::run(cfg),
        Some(Command::Replay(args)) => commands::replay::run(&cfg, &args),
        Some(_) => unreachable!("the report commands are run by workflow::dispatch"),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => commands::failed(&e),
    }
}
