//! `skua [FILE | --config FILE] [--override key=value]...`: starts a broker.
//! `skua --check-config FILE [--override key=value]...`: validates what that start would
//! read, and exits without starting.
//! `skua --add-scram 'SCRAM-SHA-512=[name=alice,password=..]' [FILE] [--override ..]`:
//! writes SCRAM credentials into the metadata log of that broker, which must be stopped.
//! `skua --probe [HOST:PORT]`: exits 0 when a broker there answers ApiVersions (the
//! container health check).
//! `skua --version`, `skua --help`.
//!
//! With no arguments skua behaves like Kafka's quickstart: it listens on port 9092,
//! advertises localhost:9092 and keeps its data under ./data.

use std::process::ExitCode;
use std::time::Instant;

use skua::broker::Broker;
use skua::config::{BrokerConfig, ConfigError};
use skua::logging::LoggingConfig;
use skua::metrics::http::MetricsListener;
use skua::network::Server;
use skua::protocol::decode_budget::MeteredAllocator;

/// Measures what each request's decode allocates, so it can be bounded (see
/// `protocol::decode_budget`).
#[global_allocator]
static ALLOCATOR: MeteredAllocator = MeteredAllocator;

const USAGE: &str = "\
usage: skua [FILE | --config FILE] [--override key=value]...
       skua --check-config FILE [--override key=value]...
       skua --add-scram 'MECHANISM=[name=NAME,password=PASSWORD]'... [FILE] [--override key=value]...
       skua --probe [HOST:PORT]
       skua --version | --help

Starts a broker configured by FILE, a Kafka server.properties. With no FILE it runs as
Kafka's quickstart: listens on :9092, advertises localhost:9092, keeps data under ./data.

  FILE, --config FILE    read a server.properties (of several, a later key wins)
  --override key=value   set one key over the files (repeatable)
  --check-config FILE    validate FILE (and any --override) exactly as startup would,
                         without binding ports, opening log dirs or connecting to
                         ZooKeeper; prints one line per error or warning; exits 0 when
                         valid, 1 on an error
  --add-scram CREDENTIAL write a SCRAM credential (SCRAM-SHA-256 or SCRAM-SHA-512, as
                         kafka-storage.sh format --add-scram takes it, optional
                         iterations=N) into the metadata log of the single-node broker
                         FILE configures, which must not be running (its log dirs are
                         locked); repeatable. Creates the first users of a broker whose
                         listeners all need SASL
  --probe [HOST:PORT]    exit 0 when a broker there answers ApiVersions
                         (default 127.0.0.1:9092)
  -V, --version          print skua's version
  -h, --help             print this help

The log is written to stdout: its format is logging.format (text or json), its levels
logging.level.<logger> (root INFO by default), changed at runtime with kafka-configs.sh
--entity-type broker-loggers; RUST_LOG, when set, lies beneath them. A bad command line
exits 2.";

/// What the command line asks for.
enum Command {
    Version,
    Help,
    Probe(String),
    /// The start's arguments, the file to check among them.
    CheckConfig(Vec<String>),
    /// The credentials to write, and the start's arguments.
    AddScram(Vec<String>, Vec<String>),
    Start(Vec<String>),
}

fn command(mut args: Vec<String>) -> Result<Command, String> {
    if args.iter().any(|a| a == "--help" || a == "-h") {
        return Ok(Command::Help);
    }
    if args.iter().any(|a| a == "--version" || a == "-V") {
        return Ok(Command::Version);
    }
    if args.first().is_some_and(|a| a == "--probe") {
        let addr = args.get(1).map_or("127.0.0.1:9092", String::as_str);
        return Ok(Command::Probe(addr.to_string()));
    }
    let mut scram = Vec::new();
    while let Some(i) = args
        .iter()
        .position(|a| a == "--add-scram" || a.starts_with("--add-scram="))
    {
        let flag = args.remove(i);
        match flag.strip_prefix("--add-scram=") {
            Some(spec) => scram.push(spec.to_string()),
            None if i < args.len() => scram.push(args.remove(i)),
            None => return Err("--add-scram needs a CREDENTIAL".into()),
        }
    }
    if !scram.is_empty() {
        return Ok(Command::AddScram(scram, args));
    }
    let check = args
        .iter()
        .position(|a| a == "--check-config" || a.starts_with("--check-config="));
    let Some(i) = check else {
        return Ok(Command::Start(args));
    };
    let flag = args.remove(i);
    let file = match flag.strip_prefix("--check-config=") {
        Some(file) => file.to_string(),
        None if args.get(i).is_some_and(|a| !a.starts_with('-')) => args.remove(i),
        None => return Err("--check-config needs a FILE".into()),
    };
    // In the flag's place: a file named after it still wins over it, as at a start.
    args.insert(i, file);
    Ok(Command::CheckConfig(args))
}

/// A bad command line: one line, and where the usage is. Not a start.
fn bad_usage(why: &str) -> ExitCode {
    eprintln!("skua: {why} (see skua --help)");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let args = match command(std::env::args().skip(1).collect()) {
        Ok(Command::Version) => {
            println!("skua {}", env!("CARGO_PKG_VERSION"));
            return ExitCode::SUCCESS;
        }
        Ok(Command::Help) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Ok(Command::Probe(addr)) => return probe(&addr),
        Ok(Command::CheckConfig(args)) => return check_config(&args),
        Ok(Command::AddScram(specs, args)) => return add_scram(&specs, &args),
        Ok(Command::Start(args)) => args,
        Err(why) => return bad_usage(&why),
    };
    let props = match skua::config::read_args(&args) {
        Ok(props) => props,
        Err(ConfigError::Usage(why)) => return bad_usage(&why),
        Err(e) => {
            eprintln!("skua: {e}");
            return ExitCode::from(2);
        }
    };
    keep_freed_heap_mapped();
    let logging = match LoggingConfig::from_properties(&props) {
        Ok(logging) => logging,
        Err(e) => {
            eprintln!("skua: {e}");
            return ExitCode::from(2);
        }
    };
    if let Err(e) = skua::logging::install(&logging) {
        eprintln!("skua: cannot set up the log: {e}");
        return ExitCode::FAILURE;
    }
    raise_fd_limit();
    let config = match BrokerConfig::from_properties(props) {
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

fn probe(addr: &str) -> ExitCode {
    match skua::client::probe::probe(addr, std::time::Duration::from_secs(5)) {
        Ok(apis) => {
            println!("{addr}: {apis} APIs");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("skua: {addr}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `--check-config`: every finding on stdout, one a line, then a summary line; exits 1
/// when one is an error. The findings never hold a value, so no secret is printed.
fn check_config(args: &[String]) -> ExitCode {
    let props = match skua::config::read_args(args) {
        Ok(props) => props,
        Err(ConfigError::Usage(why)) => return bad_usage(&why),
        Err(e) => {
            println!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let findings = skua::config::check::check_properties(props);
    for finding in &findings {
        println!("{finding}");
    }
    let errors = findings.iter().filter(|f| f.is_error()).count();
    let warnings = findings.len() - errors;
    if errors > 0 {
        println!("invalid: {errors} error(s), {warnings} warning(s)");
        ExitCode::FAILURE
    } else {
        println!("valid: {warnings} warning(s)");
        ExitCode::SUCCESS
    }
}

/// `--add-scram`: parses every credential first (nothing is written if one is wrong),
/// then writes them all in one metadata-log batch. Exits 0 when written, 1 when the
/// broker's dirs or log refuse, 2 on a bad command line or config.
fn add_scram(specs: &[String], args: &[String]) -> ExitCode {
    let mut changes = Vec::new();
    for spec in specs {
        match skua::sasl::scram_spec::ScramSpec::parse(spec).and_then(|s| s.change()) {
            Ok(change) => changes.push(change),
            Err(why) => return bad_usage(&why),
        }
    }
    let props = match skua::config::read_args(args) {
        Ok(props) => props,
        Err(ConfigError::Usage(why)) => return bad_usage(&why),
        Err(e) => {
            eprintln!("skua: {e}");
            return ExitCode::from(2);
        }
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_target(false)
        .with_writer(std::io::stderr)
        .init();
    let config = match BrokerConfig::from_properties(props) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("skua: {e}");
            return ExitCode::from(2);
        }
    };
    let written: Vec<String> = changes
        .iter()
        .map(|c| format!("{} {}", c.mechanism.name(), c.user))
        .collect();
    match skua::broker::add_scram_credentials(config, changes) {
        Ok(()) => {
            for w in written {
                println!("added {w}");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("skua: {e:#}");
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
    let metrics_listener = MetricsListener::bind(&config).await?;
    let broker = tokio::task::spawn_blocking(move || Broker::open(config)).await??;
    let metrics = metrics_listener.map(|l| l.spawn(broker.clone()));
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
    if let Some(metrics) = metrics {
        metrics.stop().await;
    }
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
