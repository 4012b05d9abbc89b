//! Log lines about the partitions of one controller request, capped.
//!
//! A controller request can name a hundred thousand partitions; one line each about the
//! same condition (a stale leader epoch, an illegal name) is megabytes of log that says
//! nothing the first few lines did not. A request's lines of one kind are written for
//! the first [`LINES_PER_REQUEST`] partitions, and the rest are counted in one last
//! line when the request is done.

/// Lines of one kind a request writes before it only counts them.
pub(super) const LINES_PER_REQUEST: usize = 10;

pub(super) struct CappedLines {
    /// What the lines are about, for the closing count.
    what: &'static str,
    written: usize,
    left_out: usize,
}

impl CappedLines {
    pub(super) fn new(what: &'static str) -> CappedLines {
        CappedLines {
            what,
            written: 0,
            left_out: 0,
        }
    }

    /// Whether the next line is to be written (else it is counted).
    pub(super) fn allow(&mut self) -> bool {
        if self.written < LINES_PER_REQUEST {
            self.written += 1;
            return true;
        }
        self.left_out += 1;
        false
    }

    #[cfg(test)]
    pub(super) fn left_out(&self) -> usize {
        self.left_out
    }
}

impl Drop for CappedLines {
    fn drop(&mut self) {
        if self.left_out > 0 {
            tracing::warn!(
                "{} more partitions of this request: {} (lines left out)",
                self.left_out,
                self.what
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_lines_are_written_and_the_rest_counted() {
        let mut lines = CappedLines::new("stale");
        let written = (0..1000).filter(|_| lines.allow()).count();
        assert_eq!(
            (written, lines.left_out()),
            (LINES_PER_REQUEST, 1000 - LINES_PER_REQUEST)
        );
    }
}
