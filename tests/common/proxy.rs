//! A loopback TCP proxy of the test suite's own, for faults a real broker cannot produce
//! on demand: it forwards, delays, blackholes (accepts and reads, never answers) or cuts
//! every open connection. The local broker advertises a listener at the proxy's address
//! (`scripts/kafka-local bootstrap proxied`), so every connection of a client bootstrapped
//! there passes through it.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Forward,
    /// Forward after a pause per chunk.
    Delay(Duration),
    /// Accept connections and read requests, never answer.
    Blackhole,
}

pub struct Proxy {
    mode: Arc<Mutex<Mode>>,
    cut: watch::Sender<u64>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    pub async fn start(listen: SocketAddr, upstream: SocketAddr) -> Proxy {
        let listener = TcpListener::bind(listen)
            .await
            .unwrap_or_else(|e| panic!("proxy cannot listen on {listen}: {e}"));
        let mode = Arc::new(Mutex::new(Mode::Forward));
        let (cut, _) = watch::channel(0u64);
        let task = {
            let mode = mode.clone();
            let cut = cut.clone();
            tokio::spawn(async move {
                while let Ok((client, _)) = listener.accept().await {
                    let mode = mode.clone();
                    let cut_rx = cut.subscribe();
                    tokio::spawn(serve(client, upstream, mode, cut_rx));
                }
            })
        };
        Proxy { mode, cut, task }
    }

    pub fn set_mode(&self, mode: Mode) {
        *self.mode.lock().unwrap() = mode;
    }

    /// Closes every open connection (the broker "dies" mid-request).
    pub fn cut_all(&self) {
        self.cut.send_modify(|generation| *generation += 1);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.cut_all();
        self.task.abort();
    }
}

async fn serve(
    client: TcpStream,
    upstream: SocketAddr,
    mode: Arc<Mutex<Mode>>,
    mut cut: watch::Receiver<u64>,
) {
    let (mut client_read, mut client_write) = client.into_split();
    let upstream = match TcpStream::connect(upstream).await {
        Ok(stream) => stream,
        Err(_) => return,
    };
    let (mut upstream_read, mut upstream_write) = upstream.into_split();
    let current = move || *mode.lock().unwrap();
    let to_broker = {
        let current = current.clone();
        async move {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                let n = match client_read.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                match current() {
                    Mode::Forward => {}
                    Mode::Delay(pause) => tokio::time::sleep(pause).await,
                    Mode::Blackhole => continue,
                }
                if upstream_write.write_all(&buf[..n]).await.is_err() {
                    break;
                }
            }
        }
    };
    let to_client = async move {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match upstream_read.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            match current() {
                Mode::Forward => {}
                Mode::Delay(pause) => tokio::time::sleep(pause).await,
                Mode::Blackhole => continue,
            }
            if client_write.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
    };
    tokio::select! {
        _ = to_broker => {}
        _ = to_client => {}
        _ = cut.changed() => {}
    }
}
