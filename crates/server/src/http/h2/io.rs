//! A connection's [`Transport`] read and written from a poll: what the HTTP/2 connections'
//! tasks (a client's, `drive.rs`; an upstream's, `grpc/wire/`) use on their socket.

use std::io;
use std::io::IoSlice;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::http::transport::Transport;

pub(crate) fn read(
    t: &mut Transport,
    cx: &mut Context<'_>,
    buf: &mut ReadBuf<'_>,
) -> Poll<io::Result<()>> {
    match t {
        Transport::Tcp(s) => Pin::new(s).poll_read(cx, buf),
        Transport::Unix(s) => Pin::new(s).poll_read(cx, buf),
        Transport::Tls(t) => t.poll_read(cx, buf),
    }
}

pub(crate) fn write(
    t: &mut Transport,
    cx: &mut Context<'_>,
    bufs: &[IoSlice<'_>],
) -> Poll<io::Result<usize>> {
    match t {
        Transport::Tcp(s) => Pin::new(s).poll_write_vectored(cx, bufs),
        Transport::Unix(s) => Pin::new(s).poll_write_vectored(cx, bufs),
        Transport::Tls(t) => t.poll_write_vectored(cx, bufs),
    }
}

pub(crate) fn flush(t: &mut Transport, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
    match t {
        Transport::Tcp(_) | Transport::Unix(_) => Poll::Ready(Ok(())),
        Transport::Tls(t) => t.poll_flush(cx),
    }
}
