//! The process, under the names every Prometheus client library gives it
//! (`process_cpu_seconds_total`, `process_resident_memory_bytes`, `process_open_fds`,
//! ...), read from `/proc/self` at scrape time, and `skua_build_info{version}`.
//! Off Linux only the build info is written.

use super::exposition::{Exposition, Kind};

pub fn write(out: &mut Exposition) {
    out.family("skua_build_info", Kind::Gauge, "skua's version (always 1)");
    out.sample("", &[("version", env!("CARGO_PKG_VERSION"))], 1);
    #[cfg(target_os = "linux")]
    linux::write(out);
}

#[cfg(target_os = "linux")]
mod linux {
    use super::{Exposition, Kind};

    /// The fields of `/proc/self/stat` used here, and the clock they count in.
    struct Stat {
        cpu_seconds: f64,
        start_time_seconds: f64,
        virtual_bytes: u64,
        resident_bytes: u64,
        threads: u64,
    }

    fn stat() -> Option<Stat> {
        let text = std::fs::read_to_string("/proc/self/stat").ok()?;
        // The command name may hold spaces and parentheses: fields start after the last ')'.
        let rest = &text[text.rfind(')')? + 1..];
        let fields: Vec<&str> = rest.split_whitespace().collect();
        // Field n of proc(5) is fields[n - 3].
        let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
        // SAFETY: sysconf only reads a system constant.
        let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
        // SAFETY: as above.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as u64;
        let boot = boot_time_seconds().unwrap_or(0) as f64;
        Some(Stat {
            cpu_seconds: (field(14)? + field(15)?) as f64 / ticks,
            threads: field(20)?,
            start_time_seconds: boot + field(22)? as f64 / ticks,
            virtual_bytes: field(23)?,
            resident_bytes: field(24)? * page,
        })
    }

    /// `btime` of `/proc/stat`: when the system booted, in seconds since the epoch.
    fn boot_time_seconds() -> Option<u64> {
        let text = std::fs::read_to_string("/proc/stat").ok()?;
        let line = text.lines().find(|l| l.starts_with("btime "))?;
        line[6..].trim().parse().ok()
    }

    fn open_fds() -> Option<usize> {
        Some(std::fs::read_dir("/proc/self/fd").ok()?.count())
    }

    fn max_fds() -> Option<u64> {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes one rlimit into the struct we own.
        let ok = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0;
        ok.then_some(limit.rlim_cur)
    }

    pub fn write(out: &mut Exposition) {
        if let Some(s) = stat() {
            out.family(
                "process_cpu_seconds_total",
                Kind::Counter,
                "User and system CPU time spent, seconds",
            );
            out.sample("", &[], s.cpu_seconds);
            out.family(
                "process_resident_memory_bytes",
                Kind::Gauge,
                "Resident memory size, bytes",
            );
            out.sample("", &[], s.resident_bytes);
            out.family(
                "process_virtual_memory_bytes",
                Kind::Gauge,
                "Virtual memory size, bytes",
            );
            out.sample("", &[], s.virtual_bytes);
            out.family(
                "process_start_time_seconds",
                Kind::Gauge,
                "Start time of the process since the Unix epoch, seconds",
            );
            out.sample("", &[], s.start_time_seconds);
            out.family("process_threads", Kind::Gauge, "OS threads");
            out.sample("", &[], s.threads);
        }
        if let Some(n) = open_fds() {
            out.family("process_open_fds", Kind::Gauge, "Open file descriptors");
            out.sample("", &[], n);
        }
        if let Some(n) = max_fds() {
            out.family(
                "process_max_fds",
                Kind::Gauge,
                "The most file descriptors the process may open",
            );
            out.sample("", &[], n);
        }
    }

    #[cfg(test)]
    mod tests {
        #[test]
        fn reads_this_process() {
            let s = super::stat().expect("/proc/self/stat");
            assert!(s.resident_bytes > 0 && s.threads >= 1);
            assert!(s.start_time_seconds > 1_500_000_000.0);
            assert!(super::open_fds().unwrap() >= 3);
        }
    }
}
