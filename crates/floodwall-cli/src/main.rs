//! `floodwall`: see what a policy does to traffic before shipping it, and operate a live one.
//!
//! - `floodwall simulate --policy "10/s" --algorithm gcra --algorithm fixed_window
//!   --traffic steady:25/s --out plot.svg`: the traffic replayed through each algorithm on
//!   floodwall-core's `MemoryStore` and a `ManualClock` (no sleeping), drawn as SVG (or
//!   `--format csv`), with a summary: admitted, refused, and the most admitted within any
//!   span of the policy's period.
//! - `floodwall inspect|reset|unban <KEY> --policy NAME (--policy-file FILE | --quota Q)
//!   --redis URL`: one key of a live policy in Redis, through `StoreExt` (`check` of cost
//!   0, `reset`, `unban`), the key formed by the layer's own extractors.
//!
//! Exit codes: 0 done; 2 for input that is not valid or a Redis that cannot be reached,
//! with one line on stderr naming the argument or the line; 1 for any other failure.

use std::io::Write as _;
use std::process::ExitCode;

use clap::Parser;
use clap::error::ErrorKind;
use floodwall_core::{Quota, parse_duration};

mod chart;
mod cli;
mod error;
mod key;
mod operate;
mod simulate;
mod timestamps;
mod traffic;

use cli::{Cli, Command, OutputFormat, SimulateArgs};
use error::Failure;
use operate::Action;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("floodwall: {}", clap_line(&e));
            return ExitCode::from(2);
        }
    };
    match execute(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("floodwall: {failure}");
            ExitCode::from(failure.code)
        }
    }
}

/// clap's message on one line, without its usage and its "try --help".
fn clap_line(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let text = text.split("\n\nUsage:").next().unwrap_or_default();
    let text = text
        .split("\n\nFor more information")
        .next()
        .unwrap_or_default();
    error::one_line(text.trim_start_matches("error: "))
}

/// Runs the command: `simulate` here, the others on a runtime for Redis's async calls.
fn execute(command: Command) -> Result<(), Failure> {
    let (action, target) = match command {
        Command::Simulate(args) => return simulate(&args),
        Command::Inspect(target) => (Action::Inspect, target),
        Command::Reset(target) => (Action::Reset, target),
        Command::Unban(target) => (Action::Unban, target),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::other("starting the runtime", e))?;
    let said = runtime.block_on(operate::run(action, &target))?;
    print!("{said}");
    Ok(())
}

/// `simulate`: every argument checked, the traffic replayed per algorithm, the chart or
/// CSV written, the summary printed.
fn simulate(args: &SimulateArgs) -> Result<(), Failure> {
    let quota: Quota = args
        .policy
        .parse()
        .map_err(|e| Failure::input(format!("--policy {:?}", args.policy), e))?;
    let policies = simulate::policies(quota, &args.algorithms)?;
    let duration = parse_duration(&args.duration)
        .map_err(|e| Failure::input(format!("--duration {:?}", args.duration), e))?;
    let bucket = match &args.bucket {
        Some(b) => parse_duration(b).map_err(|e| Failure::input(format!("--bucket {b:?}"), e))?,
        None => (quota.period() / 10).max(std::time::Duration::from_millis(1)),
    };
    let period = quota.period_micros();
    let traffic = traffic::read(&args.traffic, duration, args.seed, args.timestamps, period)?;
    let runs = policies
        .iter()
        .map(|p| simulate::run(p, &traffic))
        .collect::<Result<Vec<_>, _>>()?;
    let output = match args.format {
        OutputFormat::Svg => chart::svg(quota, &traffic, &runs, traffic::micros(bucket))?,
        OutputFormat::Csv => simulate::csv(&traffic, &runs),
    };
    let table = simulate::table(quota, &traffic, &runs);
    match &args.out {
        Some(path) => {
            std::fs::write(path, output)
                .map_err(|e| Failure::other(format!("--out {}", path.display()), e))?;
            print!("{table}");
        }
        None => {
            let mut stdout = std::io::stdout().lock();
            stdout
                .write_all(output.as_bytes())
                .and_then(|()| stdout.flush())
                .map_err(|e| Failure::other("stdout", e))?;
            eprint!("{table}");
        }
    }
    Ok(())
}
