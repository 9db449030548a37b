//! moto with the EKS add-on and pod-identity stand-in in front (`tests/eks_standin.py`).

use std::path::PathBuf;
use std::process::{Command, Stdio};

use super::{Peer, free_port, python, wait_for_port};

pub fn start_moto_with_eks_standin() -> Peer {
    let python = python();
    let port = free_port();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/eks_standin.py");
    let child = Command::new(python)
        .arg(script)
        .arg(port.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_port(port, "moto with the EKS stand-in");
    Peer { port, child }
}
