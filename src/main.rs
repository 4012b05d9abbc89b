//! `skua [FILE | --config FILE] [--override key=value]...`
//!
//! With no arguments skua behaves like Kafka's quickstart: it listens on port 9092,
//! advertises localhost:9092 and keeps its data under ./data.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use skua::broker::Broker;
use skua::network::Server;
use skua::protocol::decode_budget::MeteredAllocator;

/// Measures what each request's decode allocates, so it can be bounded (see
/// `protocol::decode_budget`).
#[global_allocator]
static ALLOCATOR: MeteredAllocator = MeteredAllocator;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--version" || a == "-V") {
        println!("skua {}", env!("CARGO_PKG_VERSION"));
        return ExitCode::SUCCESS;
    }
    if args.iter().any(|a| a == "--help" || a == "-h") {
        println!("usage: skua [FILE | --config FILE] [--override key=value]...");
        return ExitCode::SUCCESS;
    }
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_target(false)
        // Colours only on a terminal: logs redirected to a file stay plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
        .init();
    let config = match skua::config::from_args(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("skua: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("skua: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(config)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(config: skua::config::BrokerConfig) -> anyhow::Result<()> {
    let started = Instant::now();
    let checkpoint_every = Duration::from_millis(
        config
            .long("log.flush.offset.checkpoint.interval.ms")
            .unwrap_or(60_000)
            .max(100) as u64,
    );
    let mut config = config;
    let listeners = Server::bind_listeners(&mut config).await?;
    let broker = tokio::task::spawn_blocking(move || Broker::open(config)).await??;
    let server = Server::new(listeners, broker.clone());
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        broker_id = broker.config.broker_id,
        listeners = ?server.local_addrs(),
        advertised = ?broker.config.advertised_listeners.iter().map(|l| format!("{}://{}:{}", l.name, l.host, l.port)).collect::<Vec<_>>(),
        log_dirs = ?broker.config.log_dirs,
        cluster_id = %broker.controller.cluster_id(),
        startup_ms = started.elapsed().as_millis() as u64,
        "skua started"
    );
    let replicas = broker.replicas.clone();
    let checkpoints = tokio::spawn(async move {
        let mut tick = tokio::time::interval(checkpoint_every);
        tick.tick().await;
        loop {
            tick.tick().await;
            let r = replicas.clone();
            let _ = tokio::task::spawn_blocking(move || r.checkpoint()).await;
        }
    });
    server.run(stop_signal()).await;
    checkpoints.abort();
    let b = broker.clone();
    tokio::task::spawn_blocking(move || b.shutdown()).await?;
    tracing::info!("skua stopped");
    Ok(())
}

/// Resolves on SIGTERM or SIGINT.
async fn stop_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "cannot watch SIGTERM; stop with SIGINT");
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM received"),
        _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT received"),
    }
}
