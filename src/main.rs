//! `hpvm-mgpu`: the command. Parses the command line, runs the pipeline, renders errors.
//!
//! Every failure ends here as a message on stderr (with the user's file:line where there is
//! one) and exit status 1; nothing panics on user input.

mod analyze;
mod build;
mod cli;
mod error;
mod isolate;
mod libraries;
mod rdc;
mod signals;

use clap::{CommandFactory, FromArgMatches};
use std::process::ExitCode;

fn main() -> ExitCode {
    signals::clean_up_on_signals();
    let argv = cli::normalize_args(std::env::args_os());
    let matches = match cli::Cli::command().try_get_matches_from(&argv) {
        Ok(m) => m,
        Err(e) => {
            unknown_flag(&e, &argv);
            e.exit()
        }
    };
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

/// A flag neither nvcc's nor ours, named as the user wrote it (clap names the first letter of
/// a word it read as a cluster of short flags: `-s` for nvc++'s `-stdpar=gpu`); exits 1.
/// Returns for other errors (help, version, a missing value...), which clap reports itself.
fn unknown_flag(e: &clap::Error, argv: &[std::ffi::OsString]) {
    if e.kind() != clap::error::ErrorKind::UnknownArgument {
        return;
    }
    let Some(clap::error::ContextValue::String(arg)) = e.get(clap::error::ContextKind::InvalidArg) else { return };
    let word = argv.iter().skip(1).filter_map(|a| a.to_str()).find(|w| w.starts_with(arg.as_str())).unwrap_or(arg);
    eprintln!(
        "hpvm-mgpu: error: unknown option `{word}`: hpvm-mgpu takes nvcc's options (and clang's -I, -D, -U, -L, -l, \
         -std, -x, -O); `hpvm-mgpu build --help` lists them"
    );
    std::process::exit(1)
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
