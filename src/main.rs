//! `hpvm-mgpu`: the command. Parses the command line, runs the pipeline, renders errors.
//!
//! Every failure ends here as a message on stderr (with the user's file:line where there is
//! one) and exit status 1; nothing panics on user input.

mod analyze;
mod build;
mod cli;
mod error;
mod isolate;

use clap::{CommandFactory, FromArgMatches};
use std::process::ExitCode;

fn main() -> ExitCode {
    let matches = cli::Cli::command().get_matches_from(cli::normalize_args(std::env::args_os()));
    let args = cli::Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    init_logging(args.verbose);
    match cli::run(args, cli::input_languages(&matches)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            cli::report(&e);
            ExitCode::from(1)
        }
    }
}

fn init_logging(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).without_time().init();
}
