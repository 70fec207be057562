use std::process::ExitCode;

use clap::Parser;
use gpumem_exporter::cli::{Cli, Command};
use gpumem_exporter::commands;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let cfg = match cli.common.effective_config() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("gpumem-exporter: {e}");
            return ExitCode::from(2);
        }
    };
    if cli.print_config {
        print!("{}", cfg.to_yaml());
        return ExitCode::SUCCESS;
    }
    gpumem_exporter::init_logging(&cfg.log_level);
    let result = match cli.command {
        None | Some(Command::Serve) => commands::serve::run(cfg),
        Some(Command::Replay(args)) => {
            commands::replay::write_timeline(&cfg, &args.files, &args.output)
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gpumem-exporter: {e:#}");
            ExitCode::FAILURE
        }
    }
}
