//! librdkafka as most applications meet it: Confluent's Python client (confluent-kafka,
//! whose wheels bundle their own librdkafka), in a virtual environment at
//! `<repo>/.cache/venv` made on first use, running tests/python/group_member.py, a
//! consumer group member of either protocol at the client's defaults.

use std::fs::{self, File};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{mpsc, Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use super::{bootstrap, repo_root};

/// The confluent-kafka release the tests install: the newest on PyPI when pinned, with
/// manylinux_2_28 wheels (glibc 2.28 or later: Debian 12 has 2.36) for CPython 3.9 to
/// 3.13, so pip never builds it from source; they bundle librdkafka 2.16.0, a newer one
/// than rdkafka-sys's 2.12.1, so the tests meet both.
pub const CONFLUENT_KAFKA: &str = "2.16.2";

/// The venv's interpreter, with confluent-kafka [`CONFLUENT_KAFKA`] importable. The
/// first call in a process checks it (a tenth of a second when it is there) and, when
/// it is missing or of another version, makes it: under an exclusive lock on
/// `.cache/venv.lock` (test binaries run at once in several lanes), in a directory of its
/// own that is renamed to `.cache/venv` only once complete, so that an install killed
/// halfway leaves nothing that looks ready. Panics (fails the test) when it cannot.
pub fn venv_python() -> PathBuf {
    static READY: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match READY.get_or_init(ensure_venv) {
        Ok(python) => python.clone(),
        Err(e) => panic!("no Python venv with confluent-kafka {CONFLUENT_KAFKA}: {e}"),
    }
}

fn has_client(python: &Path) -> bool {
    // The installed distribution's version (confluent_kafka.version() is a plain string in
    // 2.16, no longer the (string, int) tuple older releases document).
    let check = format!(
        "import sys, importlib.metadata, confluent_kafka; \
         sys.exit(importlib.metadata.version('confluent-kafka') != {CONFLUENT_KAFKA:?})"
    );
    Command::new(python)
        .args(["-c", &check])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn ensure_venv() -> Result<PathBuf, String> {
    let cache = repo_root().join(".cache");
    let venv = cache.join("venv");
    let python = venv.join("bin/python");
    if has_client(&python) {
        return Ok(python);
    }
    fs::create_dir_all(&cache).map_err(|e| format!("create {}: {e}", cache.display()))?;
    let lock_path = cache.join("venv.lock");
    let lock = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| format!("open {}: {e}", lock_path.display()))?;
    // flock(2): waits while another process installs; the kernel releases it when the
    // holder dies, so a killed install never leaves it taken.
    lock.lock()
        .map_err(|e| format!("lock {}: {e}", lock_path.display()))?;
    // Another process may have made it while this one waited.
    if has_client(&python) {
        return Ok(python);
    }
    // Whatever a killed install left (no one else works here while the lock is held).
    for entry in fs::read_dir(&cache).map_err(|e| e.to_string())?.flatten() {
        if entry.file_name().to_string_lossy().starts_with("venv.tmp.") {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
    let work = cache.join(format!("venv.tmp.{}", std::process::id()));
    eprintln!(
        "making {} with confluent-kafka {CONFLUENT_KAFKA} from PyPI",
        venv.display()
    );
    run(
        Command::new("python3").args(["-m", "venv"]).arg(&work),
        "python3 -m venv (on Debian: apt-get install python3-venv)",
    )?;
    run(
        Command::new(work.join("bin/python"))
            .args(["-m", "pip", "install", "--disable-pip-version-check"])
            .args(["--no-input", "--quiet", "--only-binary=:all:"])
            .arg(format!("confluent-kafka=={CONFLUENT_KAFKA}")),
        "pip install confluent-kafka",
    )?;
    if !has_client(&work.join("bin/python")) {
        return Err(format!(
            "confluent-kafka {CONFLUENT_KAFKA} installed in {} but does not import",
            work.display()
        ));
    }
    if venv.exists() {
        fs::remove_dir_all(&venv).map_err(|e| format!("remove {}: {e}", venv.display()))?;
    }
    fs::rename(&work, &venv).map_err(|e| format!("rename to {}: {e}", venv.display()))?;
    drop(lock);
    Ok(python)
}

fn run(command: &mut Command, what: &str) -> Result<(), String> {
    let output = command
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{what}: {e}"))?;
    if output.status.success() {
        return Ok(());
    }
    Err(format!(
        "{what} failed ({}): {}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    ))
}

/// The last lines a child wrote to its standard error, kept by a thread that drains it
/// (so that a chatty client never blocks on a full pipe).
#[derive(Clone, Default)]
struct Stderr(Arc<Mutex<Vec<String>>>);

impl Stderr {
    const KEPT: usize = 200;

    fn drain(stream: impl Read + Send + 'static) -> Stderr {
        let kept = Stderr::default();
        let lines = kept.0.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stream).lines().map_while(Result::ok) {
                let mut lines = lines.lock().unwrap();
                if lines.len() == Self::KEPT {
                    lines.remove(0);
                }
                lines.push(line);
            }
        });
        kept
    }

    fn text(&self) -> String {
        self.0.lock().unwrap().join("\n")
    }
}

/// tests/python/group_member.py: a confluent-kafka consumer at its defaults (isolation
/// read_committed, offsets committed automatically), subscribed to one topic.
pub struct ConfluentMember {
    child: Child,
    stdin: Option<ChildStdin>,
    stderr: Stderr,
}

impl ConfluentMember {
    /// Joins `group` with `protocol` (`classic` or `consumer`) as `client_id`; returns once
    /// it owns partitions (within 60 s, or the test fails with the client's standard error).
    pub fn join(topic: &str, group: &str, protocol: &str, client_id: &str) -> ConfluentMember {
        let python = venv_python();
        let mut child = Command::new(&python)
            .arg("tests/python/group_member.py")
            .args([&bootstrap(), topic, group, protocol, client_id])
            .current_dir(repo_root())
            .env("PYTHONUNBUFFERED", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", python.display()));
        let stdin = child.stdin.take();
        let stderr = Stderr::drain(child.stderr.take().unwrap());
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            // Read to the end even once no one listens: the program's last line ("left")
            // must not meet a closed pipe.
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let mut member = ConfluentMember {
            child,
            stdin,
            stderr,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(line) if line.starts_with("assigned ") => return member,
                Ok(_) => {}
                Err(e) => {
                    let _ = member.child.kill();
                    let status = member.child.wait();
                    panic!(
                        "the confluent-kafka member {client_id} of {group} never got an \
                         assignment ({e:?}; {status:?}); its standard error:\n{}",
                        member.stderr.text()
                    );
                }
            }
        }
    }

    /// Closes its standard input: it leaves the group (close() commits and leaves) and
    /// exits, successfully, within 30 s, or the test fails.
    pub fn leave(mut self) {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            match self.child.try_wait() {
                Ok(Some(status)) => {
                    assert!(
                        status.success(),
                        "the confluent-kafka member exited with {status}; its standard error:\n{}",
                        self.stderr.text()
                    );
                    return;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(100)),
                Err(e) => panic!("wait for the confluent-kafka member: {e}"),
            }
        }
        let _ = self.child.kill();
        panic!(
            "the confluent-kafka member did not leave within 30 s; its standard error:\n{}",
            self.stderr.text()
        );
    }

    /// SIGKILL: it dies without leaving the group; only the coordinator's session timeout
    /// removes it. Returns once it is dead.
    pub fn kill(mut self) {
        let comm = fs::read_to_string(format!("/proc/{}/comm", self.child.id()))
            .expect("the confluent-kafka member's process");
        assert!(
            comm.starts_with("python"),
            "the child to kill is not the Python interpreter: {comm}"
        );
        self.child
            .kill()
            .expect("SIGKILL the confluent-kafka member");
        let status = self
            .child
            .wait()
            .expect("wait for the confluent-kafka member");
        assert!(
            status.code().is_none(),
            "the confluent-kafka member exited by itself ({status}) instead of being killed"
        );
    }
}

impl Drop for ConfluentMember {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
