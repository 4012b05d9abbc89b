//! The skua binary's command line: `--version`, `--help`, an unknown option, and
//! `--check-config`, which validates a server.properties as startup would and exits
//! without binding, opening log dirs or connecting to ZooKeeper. (`--add-scram` is
//! proven in sasl_listeners.rs, against a broker started on the dir.)

use std::io::Read;
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What one run of the binary gave: exit code, stdout, stderr.
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

/// Runs skua with `args`, killed after 30 s so a run that would start a broker (or wait
/// for ZooKeeper) fails the test instead of hanging it.
fn skua(args: &[&str]) -> Run {
    let mut child = Command::new(env!("CARGO_BIN_EXE_skua"))
        .args(args)
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn skua");
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("skua {args:?} did not exit within 30 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stdout = String::new();
    let mut stderr = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    Run {
        code: status.code().expect("exited, not killed"),
        stdout,
        stderr,
    }
}

fn write(dir: &Path, text: &str) -> String {
    let path = dir.join("server.properties");
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().into_owned()
}

#[test]
fn version_prints_cargos_version() {
    let run = skua(&["--version"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, format!("skua {}\n", env!("CARGO_PKG_VERSION")));
}

#[test]
fn help_prints_the_usage_and_every_flag() {
    let run = skua(&["--help"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run
        .stdout
        .starts_with("usage: skua [FILE | --config FILE] [--override key=value]..."));
    for flag in [
        "--config FILE",
        "--override key=value",
        "--check-config FILE",
        "--add-scram CREDENTIAL",
        "--probe",
        "--version",
        "--help",
    ] {
        assert!(run.stdout.contains(flag), "{flag} missing:\n{}", run.stdout);
    }
}

#[test]
fn an_unknown_option_is_refused_in_one_line_without_starting() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let log_dirs = format!("log.dirs={}", data.display());
    let run = skua(&["--bogus", "--override", &log_dirs]);
    assert_eq!(run.code, 2);
    assert_eq!(
        run.stderr,
        "skua: unknown option --bogus (see skua --help)\n"
    );
    assert_eq!(run.stdout, "");
    assert!(!data.exists(), "an unknown option must not start a broker");
    let run = skua(&["--check-config"]);
    assert_eq!(run.code, 2);
    assert_eq!(
        run.stderr,
        "skua: --check-config needs a FILE (see skua --help)\n"
    );
}

/// A valid file passes: its listener's port already taken, its log dir absent and its
/// ZooKeeper unreachable, none of which a check touches.
#[test]
fn check_config_passes_a_valid_file_without_binding_or_opening_anything() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let file = write(
        dir.path(),
        &format!(
            "broker.id=3\nlisteners=PLAINTEXT://127.0.0.1:{port}\nlog.dirs={}\n\
             zookeeper.connect=127.0.0.1:1\nnum.partitions=3\n",
            data.display()
        ),
    );
    let run = skua(&["--check-config", &file]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(run.stdout, "valid: 0 warning(s)\n");
    assert!(!data.exists(), "the check created the log dir");
    // An override is checked over the file, as at a start.
    let run = skua(&["--check-config", &file, "--override", "num.partitions=0"]);
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(run
        .stdout
        .contains("error: num.partitions: Value must be at least 1\n"));
}

#[test]
fn check_config_names_a_bad_value_and_why() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "num.partitions=many\nlog.segment.bytes=1000\nauto.create.topics.enable=yes\n",
    );
    let run = skua(&["--check-config", &file]);
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert_eq!(
        run.stdout,
        "error: auto.create.topics.enable: Expected value to be either true or false\n\
         error: log.segment.bytes: Value must be at least 1048576\n\
         error: num.partitions: Not a number of type INT\n\
         invalid: 3 error(s), 0 warning(s)\n"
    );
}

/// A SASL listener with Kafka's default mechanism (GSSAPI), which skua does not serve, is
/// refused naming the key; with PLAIN and its JAAS config it is valid, and the JAAS
/// config's passwords are never printed.
#[test]
fn check_config_refuses_a_sasl_listener_it_cannot_serve() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "listeners=SASL_PLAINTEXT://127.0.0.1:9093\n");
    let run = skua(&["--check-config", &file]);
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(
        run.stdout
            .starts_with("error: sasl.enabled.mechanisms: listener SASL_PLAINTEXT enables GSSAPI"),
        "{}",
        run.stdout
    );
    let file = write(
        dir.path(),
        "listeners=SASL_PLAINTEXT://127.0.0.1:9093\nsasl.enabled.mechanisms=PLAIN\n\
         listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_alice=\"hunter2\";\n",
    );
    let run = skua(&["--check-config", &file]);
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert!(!run.stdout.contains("hunter2"), "{}", run.stdout);
}

#[test]
fn check_config_warns_of_unknown_and_unacted_keys() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "num.partiton=3\nmy.own.setting=1\nbackground.threads=4\n",
    );
    let run = skua(&["--check-config", &file]);
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert_eq!(
        run.stdout,
        "warning: background.threads: a Kafka key skua accepts but does not act on\n\
         warning: my.own.setting: unknown key, ignored\n\
         warning: num.partiton: unknown key, ignored (did you mean num.partitions?)\n\
         valid: 3 warning(s)\n"
    );
}

/// Secrets stay out of the output whether the check passes or fails: a password, an
/// inline key the listener refuses, a JAAS config skua does not act on.
#[test]
fn check_config_never_prints_a_secret() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "listeners=SSL://127.0.0.1:9093\n\
         listener.security.protocol.map=SSL:SSL\n\
         inter.broker.listener.name=SSL\n\
         listener.name.ssl.ssl.keystore.type=PEM\n\
         listener.name.ssl.ssl.keystore.key=PRIVATE-KEY-s3cr3t-1\n\
         ssl.keystore.password=s3cr3t-2\n\
         ssl.key.password=s3cr3t-3\n\
         listener.name.ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required password=\"s3cr3t-4\";\n\
         ssl.truststore.pasword=s3cr3t-5\n",
    );
    let run = skua(&["--check-config", &file]);
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(
        run.stdout.contains("error: listener.name.ssl.ssl.keystore.key: an inline keystore needs both ssl.keystore.key and ssl.keystore.certificate.chain\n"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains(
            "warning: ssl.truststore.pasword: unknown key, ignored (did you mean ssl.truststore.password?)\n"
        ),
        "{}",
        run.stdout
    );
    for secret in ["s3cr3t", "PRIVATE-KEY"] {
        assert!(!run.stdout.contains(secret), "{}", run.stdout);
        assert!(!run.stderr.contains(secret), "{}", run.stderr);
    }
}
