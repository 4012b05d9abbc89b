//! A connection's writer: runs its requests' handlers one at a time, in arrival order,
//! and writes each response.
//!
//! Once the client has gone (the reader saw it close), nothing more is written and a
//! running Fetch is dropped midway (it only reads). The requests read before a clean
//! close still run in order, as Kafka handles what it read (a LeaveGroup behind a
//! waiting JoinGroup must still take its member out of the group); after a reset, or a
//! close while the connection was muted, those that expect an answer are dropped unrun,
//! with their memory, and those that expect none (acks=0 produce) still run.

use std::io;
use std::net::SocketAddr;
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncWrite, AsyncWriteExt, BufWriter};

use super::dispatch::{Job, Work};
use super::gone::ClientGone;
use super::link::JobReceiver;
use super::pipeline;
use super::transport::TransportWrite;
use crate::log::FileSlice;
use crate::metrics::Metrics;
use crate::protocol::zero_copy::Chunk;
use crate::protocol::Frame;

/// File bytes copied per write where the transport cannot `sendfile`.
const COPY_CHUNK: usize = 64 * 1024;

/// How long a failed authentication's answer stays on an open connection before the
/// broker closes it. A client that reads the answer and the close in one pass may act
/// on the close first and drop the answer (kafka-python 3 then reports a bootstrap
/// timeout instead of the authentication error): the pause lets it read the answer
/// alone. Clients close on the answer themselves, so the pause rarely runs to its end.
const FAILED_AUTHENTICATION_LINGER: Duration = Duration::from_millis(500);

pub async fn write_responses<W: TransportWrite>(
    writer: W,
    pending: JobReceiver,
    peer: SocketAddr,
    metrics: Arc<Metrics>,
) {
    let mut socket = writer;
    let gone = &pending.link().gone;
    // Until when the next answer is held back (a quota's throttle, KIP-219).
    let mut held_until = None;
    while let Some(first) = pending.recv().await {
        // The burst is boxed: what answering a request needs (the write buffer, the
        // handler's select, the write futures) is then allocated for the burst only, and
        // an idle connection's writer task is no larger than its wait for the next job.
        let burst = write_burst(
            socket,
            first,
            &pending,
            gone,
            peer,
            &metrics,
            &mut held_until,
        );
        socket = match Box::pin(burst).await {
            Some(socket) => socket,
            None => return,
        };
        // Answering is activity: the idle limit counts from the last answer written.
        pending.link().touch();
    }
    let _ = socket.shutdown().await;
}

/// Answers `first` and then every job already queued behind it, through one write buffer,
/// so that pipelined responses share a syscall; flushes once the queue is drained. Gives
/// the socket back for the next burst, or `None` once the connection is closed or failed.
async fn write_burst<W: TransportWrite>(
    socket: W,
    first: Box<Job>,
    pending: &JobReceiver,
    gone: &ClientGone,
    peer: SocketAddr,
    metrics: &Metrics,
    held_until: &mut Option<tokio::time::Instant>,
) -> Option<W> {
    // The write buffer lives for one burst, so an idle connection holds none.
    let mut out = BufWriter::new(socket);
    let mut job = first;
    loop {
        match answer(&mut out, *job, gone, peer, metrics, held_until).await {
            Step::Next => {}
            Step::Close => {
                let _ = out.flush().await;
                let _ = out.into_inner().shutdown().await;
                return None;
            }
            Step::Linger => {
                if out.flush().await.is_ok() {
                    tokio::select! {
                        _ = tokio::time::sleep(FAILED_AUTHENTICATION_LINGER) => {}
                        _ = pending.link().stopped() => {}
                    }
                }
                let _ = out.into_inner().shutdown().await;
                return None;
            }
            Step::Failed => return None,
        }
        job = match pending.try_recv() {
            Some(job) => job,
            None => break,
        };
    }
    if let Err(e) = out.flush().await {
        tracing::debug!(%peer, error = %e, "flush failed");
        return None;
    }
    Some(out.into_inner())
}

/// What the writer does after a job.
enum Step {
    Next,
    /// Close the connection after flushing what was written.
    Close,
    /// A failed authentication was answered: close the connection after
    /// [`FAILED_AUTHENTICATION_LINGER`].
    Linger,
    /// The connection failed: write nothing more.
    Failed,
}

/// Runs one job's handler (unless the client abandoned it and it expects an answer) and
/// writes its response into `out`. A throttled answer sets `held_until`: the next job
/// waits for it before its handler runs (KIP-219: the throttled client has its answer,
/// with the throttle time, and gets nothing more meanwhile; the reader mutes once the
/// queue of unanswered requests is full). Without a next job (the client left, the
/// broker stops) nothing waits.
async fn answer<W: TransportWrite>(
    out: &mut BufWriter<W>,
    job: Job,
    gone: &ClientGone,
    peer: SocketAddr,
    metrics: &Metrics,
    held_until: &mut Option<tokio::time::Instant>,
) -> Step {
    if let Some(until) = held_until.take() {
        tokio::select! {
            _ = tokio::time::sleep_until(until) => {}
            _ = gone.wait() => {}
        }
    }
    if gone.is_abandoned() && job.expects_response {
        return Step::Next;
    }
    let mut then = Step::Next;
    let (frame, throttle, sent) = match job.work {
        Work::Ready(frame) => (Some(frame), Duration::ZERO, None),
        Work::Silent => (None, Duration::ZERO, None),
        Work::Delayed(Some(frame), delay) => {
            tokio::time::sleep(delay).await;
            then = Step::Linger;
            (Some(frame), Duration::ZERO, None)
        }
        Work::Delayed(None, delay) => {
            tokio::time::sleep(delay).await;
            (None, Duration::ZERO, None)
        }
        Work::Pipelined(mut run, request) => {
            let handled = match job.cancel_on_disconnect {
                true => tokio::select! {
                    handled = &mut run => handled,
                    _ = gone.wait() => return Step::Next,
                },
                false => run.await,
            };
            match pipeline::finish(metrics, &request, handled, job.expects_response) {
                Ok(answer) => (
                    answer.frame,
                    answer.throttle,
                    Some((request, answer.handled_at)),
                ),
                Err(why) => {
                    tracing::error!(%peer, "{why}; closing connection");
                    return Step::Close;
                }
            }
        }
    };
    let Some(frame) = frame else {
        // An acks=0 produce over its quota has no answer, but the connection still
        // waits its throttle (as Kafka mutes its channel).
        if !throttle.is_zero() {
            *held_until = Some(tokio::time::Instant::now() + throttle);
        }
        return Step::Next;
    };
    if gone.is_set() {
        return Step::Next;
    }
    if let Err(e) = write_frame(out, frame).await {
        // A segment truncated under a planned fetch answer is worth a line.
        if e.kind() == io::ErrorKind::UnexpectedEof {
            tracing::warn!(%peer, error = %e, "closing connection");
        } else {
            tracing::debug!(%peer, error = %e, "write failed");
        }
        return Step::Failed;
    }
    if let Some((request, handled_at)) = sent {
        pipeline::sent(metrics, &request, handled_at);
    }
    if !throttle.is_zero() {
        // The throttled answer goes out now; the next one waits (`held_until`).
        if out.flush().await.is_err() {
            return Step::Failed;
        }
        *held_until = Some(tokio::time::Instant::now() + throttle);
    }
    // The request's memory (job.memory) is released here, once its response is written
    // into the buffer or the socket.
    then
}

/// Writes one response: memory chunks through the buffer (large ones, fetched records,
/// go straight to the socket), file chunks from the page cache with `sendfile` where the
/// transport allows it.
async fn write_frame<W: TransportWrite>(out: &mut BufWriter<W>, frame: Frame) -> io::Result<()> {
    for chunk in &frame {
        match chunk {
            Chunk::Bytes(b) => out.write_all(b).await?,
            Chunk::File(slice) if out.get_ref().supports_sendfile() => {
                out.flush().await?;
                out.get_ref().send_file(slice).await?;
            }
            Chunk::File(slice) => copy_file(out, slice).await?,
        }
    }
    Ok(())
}

/// Writes `slice` through a buffer of [`COPY_CHUNK`] bytes, for transports that must see
/// the bytes (TLS). A file shorter than the slice is an error, as with `sendfile`.
async fn copy_file<W: AsyncWrite + Unpin>(out: &mut W, slice: &FileSlice) -> io::Result<()> {
    let mut buf = vec![0u8; COPY_CHUNK.min(slice.len())];
    let mut done = 0usize;
    while done < slice.len() {
        let want = (slice.len() - done).min(buf.len());
        let n = slice
            .file()
            .read_at(&mut buf[..want], slice.position() + done as u64)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "segment file is shorter than the records being sent",
            ));
        }
        out.write_all(&buf[..n]).await?;
        done += n;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::pin::Pin;
    use std::sync::Arc;
    use std::task::{Context, Poll};

    use bytes::Bytes;

    use super::*;

    /// A transport that must see every byte, as TLS will.
    struct NoSendfile(Vec<u8>);

    impl AsyncWrite for NoSendfile {
        fn poll_write(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            self.0.extend_from_slice(buf);
            Poll::Ready(Ok(buf.len()))
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    impl TransportWrite for NoSendfile {
        fn supports_sendfile(&self) -> bool {
            false
        }
        async fn send_file(&self, _: &FileSlice) -> io::Result<()> {
            unreachable!("sendfile on a transport that refuses it")
        }
    }

    #[tokio::test]
    async fn a_transport_without_sendfile_gets_file_bytes_copied_in_order() {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(b"..records..").unwrap();
        let frame = vec![
            Chunk::Bytes(Bytes::from_static(b"head:")),
            Chunk::File(FileSlice::new(Arc::new(f), 2, 7)),
            Chunk::Bytes(Bytes::from_static(b":tail")),
        ];
        let mut out = BufWriter::new(NoSendfile(Vec::new()));
        write_frame(&mut out, frame).await.unwrap();
        out.flush().await.unwrap();
        assert_eq!(out.get_ref().0, b"head:records:tail");
    }

    #[tokio::test]
    async fn file_ranges_are_copied_where_sendfile_is_not_allowed() {
        let mut f = tempfile::tempfile().unwrap();
        let data: Vec<u8> = (0..200_000u32).map(|i| i as u8).collect();
        f.write_all(&data).unwrap();
        let file = Arc::new(f);
        let slice = FileSlice::new(file.clone(), 10, 150_000);
        let mut out = Vec::new();
        copy_file(&mut out, &slice).await.unwrap();
        assert_eq!(out, &data[10..150_010]);

        let past_end = FileSlice::new(file, 199_000, 5_000);
        let err = copy_file(&mut Vec::new(), &past_end).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
    }
}
