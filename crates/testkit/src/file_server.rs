//! A tiny HTTP/1.1 file server on 127.0.0.1, for the K3s bundle files fabric fetches by URL
//! (`providers::bundle`): each file at its path, `/moved/<path>` redirecting to `/<path>`, 404
//! for anything else. It records the path of every request, answers at most 32 connections, and
//! stops with the test process. Plain std: one thread, one request per connection.
//!
//! It models no upstream program: it stands for any HTTP server holding the bundle (a GitHub
//! release download answers with a redirect, hence `/moved/`; RFC 9110 §15.4 says a client
//! follows it). Not covered: TLS, range requests, slow or truncated bodies.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

pub struct FileServer {
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    requests: Arc<Mutex<Vec<String>>>,
}

impl FileServer {
    pub fn start(files: &[(&str, &[u8])]) -> FileServer {
        let files: Vec<(String, Vec<u8>)> = files.iter().map(|(p, b)| (p.to_string(), b.to_vec())).collect();
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let base = format!("http://{}", listener.local_addr().expect("its address"));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = requests.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming().take(32) {
                let Ok(mut conn) = conn else { continue };
                let Ok(read) = conn.try_clone() else { continue };
                let mut lines = BufReader::new(read).lines();
                let first = lines.next().and_then(Result::ok).unwrap_or_default();
                while lines.next().and_then(Result::ok).is_some_and(|l| !l.is_empty()) {}
                let path = first.split(' ').nth(1).unwrap_or_default().to_string();
                seen.lock().expect("not poisoned").push(path.clone());
                let found = files.iter().find(|(p, _)| *p == path);
                let (head, body): (String, &[u8]) = match (found, path.strip_prefix("/moved")) {
                    (Some((_, b)), _) => ("200 OK".into(), b),
                    (None, Some(to)) => (format!("302 Found\r\nLocation: {to}"), b""),
                    (None, None) => ("404 Not Found".into(), b"no such file"),
                };
                let _ = write!(conn, "HTTP/1.1 {head}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len());
                let _ = conn.write_all(body);
            }
        });
        FileServer { base, requests }
    }

    /// The paths asked for so far, in order.
    pub fn requests(&self) -> Vec<String> {
        self.requests.lock().expect("not poisoned").clone()
    }
}
