//! What the tests that run an example binary share: starting it on a port the OS picks,
//! its printed lines, and a bare HTTP/1.1 request over a fresh connection.

// Each test binary uses a part of this.
#![allow(dead_code)]

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;

/// An example server, killed when the test ends however it ends.
pub(crate) struct Server(pub(crate) Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A running example: its process, the address it printed, and its later lines.
pub(crate) struct Example {
    pub(crate) server: Server,
    pub(crate) addr: String,
    pub(crate) lines: mpsc::Receiver<String>,
}

/// Starts the example `name` with `LISTEN=127.0.0.1:0` and `env`, and waits for its first
/// line, which names the address once the listener is bound. Its stdout is read to the
/// end on a thread of its own, so a line printed later never meets a closed pipe.
pub(crate) fn start_example(name: &str, test: &str, env: &[(&str, &OsStr)]) -> Example {
    let binary = example_binary(name, test);
    let mut child = Command::new(&binary)
        .env("LISTEN", "127.0.0.1:0")
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary.display()));
    let stdout = child.stdout.take().expect("piped stdout");
    let server = Server(child);
    let (sender, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            // The test may be done with the lines: keep draining the pipe all the same.
            let _ = sender.send(line);
        }
    });
    let first = lines.recv().expect("the example's first line");
    let addr = first
        .split_whitespace()
        .find(|word| word.contains("127.0.0.1:"))
        .unwrap_or_else(|| panic!("no address in the example's first line: {first:?}"))
        .trim_start_matches("http://")
        .trim_end_matches([',', '/'])
        .to_owned();
    Example {
        server,
        addr,
        lines,
    }
}

/// Sends `head` (a request line and header lines, each ending in CRLF, without the blank
/// line) to `addr` over a fresh connection that closes after the answer: the raw response.
pub(crate) fn request(addr: &str, head: &str) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    write!(stream, "{head}Host: {addr}\r\nConnection: close\r\n\r\n").unwrap();
    let mut raw = String::new();
    stream.read_to_string(&mut raw).unwrap();
    raw
}

/// A raw response's status code.
pub(crate) fn status(raw: &str) -> u16 {
    raw.split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no status in {raw:?}"))
}

/// `target/<profile>/examples/<name>`, built by `cargo test` beside the test binary
/// (`target/<profile>/deps/<test>-<hash>`); `test` names the test for the hint.
pub(crate) fn example_binary(name: &str, test: &str) -> PathBuf {
    let me = std::env::current_exe().expect("the test binary's own path");
    let profile_dir = me
        .parent()
        .and_then(Path::parent)
        .expect("the test binary lives in target/<profile>/deps");
    let binary = profile_dir
        .join("examples")
        .join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    assert!(
        binary.is_file(),
        "the {name} example is not built at {}: run the whole `cargo test --workspace \
         --all-features`, or `cargo build --all-features --example {name}` before a \
         `--test {test}` run",
        binary.display()
    );
    binary
}
