//! `skua [FILE | --config FILE] [--override key=value]...`
//! `skua --probe [HOST:PORT]`: exits 0 when a broker there answers ApiVersions (the
//! container health check).
//!
//! With no arguments skua behaves like Kafka's quickstart: it listens on port 9092,
//! advertises localhost:9092 and keeps its data under ./data.

use std::process::ExitCode;
use std::time::Instant;

use skua::broker::Broker;
use skua::config::BrokerConfig;
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
        println!("       skua --probe [HOST:PORT]   (default 127.0.0.1:9092)");
        return ExitCode::SUCCESS;
    }
    if args.first().is_some_and(|a| a == "--probe") {
        let addr = args.get(1).map(String::as_str).unwrap_or("127.0.0.1:9092");
        return match skua::client::probe::probe(addr, std::time::Duration::from_secs(5)) {
            Ok(apis) => {
                println!("{addr}: {apis} APIs");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("skua: {addr}: {e}");
                ExitCode::FAILURE
            }
        };
    }
    keep_freed_heap_mapped();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_target(false)
        // Colours only on a terminal: logs redirected to a file stay plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
        .init();
    raise_fd_limit();
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

async fn run(config: BrokerConfig) -> anyhow::Result<()> {
    let started = Instant::now();
    // Watched before the listeners bind and the logs load: a SIGTERM in that time is
    // kept and stops the broker cleanly once it serves, instead of killing it by the
    // default action (an unclean stop, recovered at the next start).
    let stop = StopSignals::watch();
    let mut config = config;
    let listeners = Server::bind_listeners(&mut config).await?;
    let broker = tokio::task::spawn_blocking(move || Broker::open(config)).await??;
    let server = Server::new(listeners, broker.clone());
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        broker_id = broker.config().broker_id,
        listeners = ?server.local_addrs(),
        advertised = ?broker.config().advertised_listeners.iter().map(|l| format!("{}://{}:{}", l.name, l.host, l.port)).collect::<Vec<_>>(),
        log_dirs = ?broker.config().log_dirs,
        cluster_id = %broker.controller.cluster_id(),
        startup_ms = started.elapsed().as_millis() as u64,
        "skua started"
    );
    broker.handle_log_dir_failures();
    // A cluster member asks its controller to move its leaderships away while it still
    // serves requests (the controller may be this very broker).
    let stopping = broker.clone();
    server
        .run(async move {
            stop.wait().await;
            stopping.controlled_shutdown().await;
        })
        .await;
    let b = broker.clone();
    tokio::task::spawn_blocking(move || b.shutdown()).await?;
    tracing::info!("skua stopped");
    Ok(())
}

/// Fixes glibc's trim and mmap thresholds, before any thread starts. By default glibc
/// gives the free memory at the top of an arena back to the kernel
/// (`madvise(MADV_DONTNEED)`) once it exceeds 128 KiB, and a connection reading produce
/// requests frees its 64 KiB+ read buffers there one after another: the arena was trimmed
/// after up to one request in six, and its pages faulted back in by the next. Up to 4 MiB
/// free at an arena's top is now kept, and allocations below 1 MiB always come from the
/// arenas. Setting either turns glibc's adaptive thresholds off, so both are set; the
/// adaptive ones would reach about these values once a 1 MiB buffer had been freed.
fn keep_freed_heap_mapped() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        const TRIM_THRESHOLD: libc::c_int = 4 << 20;
        const MMAP_THRESHOLD: libc::c_int = 1 << 20;
        // SAFETY: mallopt only sets allocator parameters; called before other threads run.
        let set = unsafe {
            libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
                && libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
        };
        if !set {
            eprintln!("skua: cannot set the allocator's trim and mmap thresholds");
        }
    }
}

/// Raises the soft limit on open files to the hard limit, as Kafka's start scripts expect
/// of the host: each segment holds one descriptor and each connection one more.
fn raise_fd_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        let e = std::io::Error::last_os_error();
        tracing::warn!(error = %e, "cannot read the open-files limit");
        return;
    }
    let soft = limit.rlim_cur;
    if soft < limit.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: limit.rlim_max,
            rlim_max: limit.rlim_max,
        };
        // SAFETY: setrlimit reads one rlimit from a struct we own.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
            let e = std::io::Error::last_os_error();
            tracing::warn!(soft, hard = limit.rlim_max, error = %e, "cannot raise the open-files limit");
            return;
        }
    }
    tracing::info!(
        soft_before = soft,
        soft = limit.rlim_max,
        hard = limit.rlim_max,
        "open-files limit (RLIMIT_NOFILE)"
    );
}

/// SIGTERM and SIGINT, each watched from `watch` on (a signal that arrives before `wait`
/// is kept).
struct StopSignals {
    term: Option<tokio::signal::unix::Signal>,
    int: Option<tokio::signal::unix::Signal>,
}

impl StopSignals {
    fn watch() -> Self {
        use tokio::signal::unix::{signal, SignalKind};
        let watched = |kind: SignalKind, name: &str| {
            signal(kind)
                .inspect_err(|e| tracing::error!(error = %e, "cannot watch {name}"))
                .ok()
        };
        StopSignals {
            term: watched(SignalKind::terminate(), "SIGTERM"),
            int: watched(SignalKind::interrupt(), "SIGINT"),
        }
    }

    /// Resolves on SIGTERM or SIGINT (never if neither could be watched).
    async fn wait(mut self) {
        async fn next(s: &mut Option<tokio::signal::unix::Signal>) {
            match s {
                Some(s) => {
                    s.recv().await;
                }
                None => std::future::pending().await,
            }
        }
        tokio::select! {
            _ = next(&mut self.term) => tracing::info!("SIGTERM received"),
            _ = next(&mut self.int) => tracing::info!("SIGINT received"),
        }
    }
}
