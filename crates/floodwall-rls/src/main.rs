//! `floodwall-rls`: the rate-limit service as a program (`floodwall-rls --help`).
//!
//! Exit codes: 0 after a graceful stop (SIGTERM, Ctrl-C), 2 for a command line or a
//! configuration that is not valid (the configuration's error names its file, line,
//! column and field), 1 when the store cannot be reached or an address (`--listen`,
//! `--metrics`) bound at startup.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::RateLimitServiceServer;
use floodwall_core::DynStore;
use floodwall_rls::RateLimitService;
use floodwall_rls::config::Config;
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio::sync::oneshot;
use tonic::transport::Server;
use tonic::transport::server::TcpIncoming;
use tonic_health::server::HealthReporter;
use tracing::{error, info, warn};

mod cli;
mod prometheus;

/// The service as this binary runs it.
type Service = RateLimitService<Arc<dyn DynStore>>;

fn main() -> ExitCode {
    let args = cli::Args::read();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();

    let config = match Config::load(&args.config) {
        Ok(config) => config,
        Err(e) => {
            error!("the configuration does not load: {e}");
            return ExitCode::from(2);
        }
    };
    log_loaded(&config, &args.config, "configuration loaded");

    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            error!("could not start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args, config)) {
        Ok(()) => {
            info!("stopped");
            ExitCode::SUCCESS
        }
        Err(e) => {
            error!("{e}");
            ExitCode::FAILURE
        }
    }
}

/// Serves until SIGTERM or Ctrl-C, reloading on SIGHUP.
async fn run(args: cli::Args, config: Config) -> Result<(), String> {
    let store = args
        .store()
        .await
        .map_err(|e| format!("could not connect to {}: {e}", args.store_name()))?;
    let service: Service =
        RateLimitService::new(config, store).response_headers(args.response_headers);
    // The recorder is in place before the first request is decided.
    let metrics = match args.metrics {
        Some(addr) => prometheus::serve(addr).await?.to_string(),
        None => "off".to_owned(),
    };

    // The handlers are in place before the server says it serves: SIGHUP's default action
    // would end the process.
    let hangup = signal(SignalKind::hangup()).map_err(|e| format!("SIGHUP handler: {e}"))?;
    let terminate = signal(SignalKind::terminate()).map_err(|e| format!("SIGTERM handler: {e}"))?;

    // Without TCP_NODELAY, Nagle's algorithm holds back the small frames of one call's
    // answer while an earlier one waits for its ACK (BENCHMARKS.md §8).
    let incoming = TcpIncoming::bind(args.listen)
        .map_err(|e| format!("could not listen on {}: {e}", args.listen))?
        .with_nodelay(Some(true));
    let addr = incoming
        .local_addr()
        .map_err(|e| format!("could not listen on {}: {e}", args.listen))?;

    let (health, health_service) = tonic_health::server::health_reporter();
    health
        .set_serving::<RateLimitServiceServer<Service>>()
        .await;

    tokio::spawn(reload_on_hangup(
        args.config.clone(),
        service.clone(),
        hangup,
    ));

    info!(
        %addr,
        store = %args.store_name(),
        fail_mode = %args.fail_mode_name(),
        %metrics,
        response_headers = args.response_headers,
        "serving envoy.service.ratelimit.v3.RateLimitService and grpc.health.v1.Health"
    );
    let (stopping, stopped) = oneshot::channel();
    let grace = Duration::from_secs(args.shutdown_grace);
    let server = Server::builder()
        .add_service(health_service)
        .add_service(service.into_server())
        .serve_with_incoming_shutdown(incoming, shutdown(terminate, health, stopping));
    // The server returns once every connection is closed: a client that keeps an idle
    // one open (or stops reading) would hold the process forever without this bound.
    let cut_off = async {
        if stopped.await.is_ok() {
            tokio::time::sleep(grace).await;
        } else {
            std::future::pending::<()>().await;
        }
    };
    tokio::select! {
        served = server => served.map_err(|e| format!("the server failed: {e}")),
        () = cut_off => {
            warn!(grace_secs = grace.as_secs(), "connections still open after the grace period: closing them");
            Ok(())
        }
    }
}

/// Resolves on SIGTERM or Ctrl-C, after telling health checkers the service is going
/// and `stopping` that the grace period starts. Requests in flight then finish; new
/// connections are refused.
async fn shutdown(mut terminate: Signal, health: HealthReporter, stopping: oneshot::Sender<()>) {
    let which = tokio::select! {
        _ = terminate.recv() => "SIGTERM",
        _ = tokio::signal::ctrl_c() => "Ctrl-C",
    };
    info!(signal = which, "stopping: finishing the requests in flight");
    health
        .set_not_serving::<RateLimitServiceServer<Service>>()
        .await;
    health
        .set_service_status("", tonic_health::ServingStatus::NotServing)
        .await;
    let _ = stopping.send(());
}

/// On each SIGHUP, reads the whole configuration again and swaps it in; one that does not
/// load is logged and changes nothing.
async fn reload_on_hangup(path: PathBuf, service: Service, mut hangup: Signal) {
    while hangup.recv().await.is_some() {
        let from = path.clone();
        match tokio::task::spawn_blocking(move || Config::load(&from)).await {
            Ok(Ok(config)) => {
                log_loaded(&config, &path, "configuration reloaded");
                service.set_config(config);
            }
            Ok(Err(e)) => {
                error!("configuration not reloaded, the one in use stays: {e}");
            }
            Err(e) => error!("configuration not reloaded, the one in use stays: {e}"),
        }
    }
}

/// Logs a configuration's warnings, then what it holds.
fn log_loaded(config: &Config, path: &Path, what: &str) {
    for warning in config.warnings() {
        warn!("{warning}");
    }
    let domains: Vec<&str> = config.domains().map(|d| d.name()).collect();
    info!(
        path = %path.display(),
        domains = %domains.join(","),
        warnings = config.warnings().len(),
        "{what}"
    );
}
